"""dsmount.locality: the cache-aware split keeps DistributedSampler's global
batches exactly, gives every rank exactly its batch size, covers the epoch
as DistributedSampler does, and serves from the nodes' caches."""

import json
import os
import random
import unittest
from collections import Counter

try:
    import numpy as np
    import torch
    from torch.utils.data import DistributedSampler
except ImportError:  # pragma: no cover - the suite installs both
    torch = None

if torch is not None:
    from dsmount import locality


class DependenciesTest(unittest.TestCase):
    # The tests below must not pass by being skipped: test/run.sh installs
    # Debian's python3-torch (and numpy with it).
    def test_present(self):
        self.assertIsNotNone(torch, "torch or numpy is missing")


def ds_batches(n, world, seed, epoch, shuffle, drop_last, batch):
    """DistributedSampler's per-rank lists and its global batches (as
    Counters), for a DataLoader of batch size ``batch`` on every rank."""
    lists = []
    for r in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=r, shuffle=shuffle, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        lists.append(list(s))
    steps = (len(lists[0]) + batch - 1) // batch
    return lists, [Counter(x for l in lists for x in l[k * batch:(k + 1) * batch]) for k in range(steps)]


def bitmap_of(indices, n):
    b = bytearray((n + 7) // 8)
    for i in indices:
        b[i >> 3] |= 1 << (i & 7)
    return bytes(b)


@unittest.skipIf(torch is None, "needs torch and numpy")
class DistributedOrderTest(unittest.TestCase):
    def test_matches_distributed_sampler(self):
        for n in (1, 7, 64, 1000, 1001):
            for world in (1, 3, 4, 8):
                for drop_last in (False, True):
                    for shuffle in (True, False):
                        with self.subTest(n=n, world=world, drop_last=drop_last, shuffle=shuffle):
                            order, num = locality.distributed_order(n, world, 5, 2, shuffle, drop_last)
                            lists, _ = ds_batches(n, world, 5, 2, shuffle, drop_last, 1)
                            for r in range(world):
                                self.assertEqual(order[r::world].tolist(), lists[r])
                            self.assertEqual(num, len(lists[0]))


@unittest.skipIf(torch is None, "needs torch and numpy")
class SplitTest(unittest.TestCase):
    def check_exact(self, n, nodes, per_node, batch, seed, epoch, drop_last, bitmaps):
        rank_nodes = [r // per_node for r in range(nodes * per_node)]
        random.Random(seed).shuffle(rank_nodes)  # ranks of a node need not be adjacent
        world = len(rank_nodes)
        order, num = locality.distributed_order(n, world, seed, epoch, True, drop_last)
        got = [locality.split(order, num, batch, rank_nodes, bitmaps, r) for r in range(world)]
        lists, want = ds_batches(n, world, seed, epoch, True, drop_last, batch)
        for r in range(world):
            self.assertEqual(len(got[r]), len(lists[r]), "rank %d's epoch" % r)
        for k, w in enumerate(want):
            parts = [got[r][k * batch:(k + 1) * batch].tolist() for r in range(world)]
            sizes = {len(p) for p in parts}
            self.assertEqual(sizes, {len(lists[0][k * batch:(k + 1) * batch])}, "step %d: every rank's batch size" % k)
            self.assertEqual(Counter(x for p in parts for x in p), w, "step %d: the global batch" % k)
        self.assertEqual(Counter(x for g in got for x in g.tolist()), Counter(x for l in lists for x in l), "the epoch")
        return got, rank_nodes

    def test_global_batches_are_distributed_samplers(self):
        rnd = random.Random(1)
        cases = 0
        for n in (5, 100, 257, 1000, 2053):
            for nodes, per_node in ((1, 1), (2, 1), (4, 1), (3, 2), (4, 2), (8, 1)):
                for batch in (1, 3, 8, 32):
                    for drop_last in (False, True):
                        world = nodes * per_node
                        seed = rnd.randrange(1000)
                        # Some nodes know nothing, others a random part,
                        # some overlapping.
                        bitmaps = [None if rnd.random() < 0.2 else
                                   bitmap_of(rnd.sample(range(n), rnd.randrange(n + 1)), n) for _ in range(nodes)]
                        with self.subTest(n=n, nodes=nodes, per_node=per_node, batch=batch, drop_last=drop_last, seed=seed):
                            self.check_exact(n, nodes, per_node, batch, seed, rnd.randrange(5), drop_last, bitmaps)
                            cases += 1
        self.assertGreater(cases, 200)

    def test_disjoint_shares_are_read_where_cached(self):
        # Four nodes each caching its home quarter: nearly every read is
        # local (the rest: a node's share of a batch beyond its room).
        n, nodes, batch = 10000, 4, 64
        home = locality.home_nodes(np.arange(n), nodes)
        bitmaps = [bitmap_of(np.flatnonzero(home == m).tolist(), n) for m in range(nodes)]
        got, rank_nodes = self.check_exact(n, nodes, 1, batch, 3, 1, False, bitmaps)
        local = sum(int(np.count_nonzero(home[g] == rank_nodes[r])) for r, g in enumerate(got))
        self.assertGreater(local / sum(len(g) for g in got), 0.9)

    def test_cold_epoch_reads_home_shares(self):
        n, nodes = 4000, 4
        got, rank_nodes = self.check_exact(n, nodes, 2, 16, 7, 0, False, [None] * nodes)
        home = locality.home_nodes(np.arange(n), nodes)
        at_home = sum(int(np.count_nonzero(home[g] == rank_nodes[r])) for r, g in enumerate(got))
        self.assertGreater(at_home / n, 0.9)

    def test_empty_epochs(self):
        # An empty dataset, and drop_last with fewer samples than ranks:
        # DistributedSampler yields nothing, and so does the split.
        order, num = locality.distributed_order(0, 4, 0, 0)
        self.assertEqual((len(order), num), (0, 0))
        order, num = locality.distributed_order(3, 4, 0, 0, drop_last=True)
        self.assertEqual((len(order), num), (0, 0))
        self.assertEqual(len(locality.Plan(3, [0, 0, 1, 1], [None, None]).split(order, num, 2, 3)), 0)

    def test_bad_arguments(self):
        order, num = locality.distributed_order(10, 2, 0, 0)
        with self.assertRaises(ValueError):
            locality.split(order, num, 0, [0, 0], [None], 0)
        with self.assertRaises(ValueError):
            locality.split(order, num, 2, [0, 1], [None], 0)  # node 1 has no bitmap slot
        with self.assertRaises(ValueError):
            locality.split(order[:-1], num, 2, [0, 0], [None], 0)
        with self.assertRaises(ValueError):
            locality.distributed_order(5, 0, 0, 0)

    def test_node_index(self):
        self.assertEqual(locality.node_index(["b", "a", "b", "c"]), ([0, 1, 0, 2], ["b", "a", "c"]))




class _FakeClient:
    """A node's control client: answers cached() with the node's bitmap and
    records declarations."""

    def __init__(self, bitmap, n):
        self.mountpoint = "/mnt/fake"
        self.bitmap, self.n = bitmap, n
        self.declared = []

    def cached(self, table):
        from dsmount import CachedFiles, DsmountError
        if self.bitmap is None:
            raise DsmountError("/mnt/fake: the daemon does not answer")
        return CachedFiles(len(table), self.bitmap)

    def declare_indices(self, job, epoch, table, indices, next_indices=None):
        self.declared.append((epoch, list(indices), list(next_indices or [])))
        return {"declared": len(self.declared[-1][1])}

    def end_job(self, job):
        return True


def _init_group(store, rank, world):
    """Join the gloo group whose rendezvous is the file ``store`` (no port
    to race for), giving up after a minute instead of hanging."""
    import datetime
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))


def _rank_main(rank, world, store, n, batch, nodes_of, out, mode="ok"):
    """One rank of SamplerTest. mode "table": rank 1 lists other paths;
    "down": node 1's daemon does not answer; "rank": every sampler is
    built, before the group, as rank 0."""
    import torch.distributed as dist
    from dsmount import DistributedOrderedSampler, DsmountError

    early = None
    if mode == "rank":
        early = DistributedOrderedSampler(range(n), ["d/%d" % i for i in range(n)], num_replicas=world, rank=0,
                                          client=_FakeClient(None, n), seed=11, locality=True, batch_size=batch)
    _init_group(store, rank, world)
    try:
        nodes = max(nodes_of) + 1
        home = locality.home_nodes(np.arange(n), nodes)
        bitmap = bitmap_of(np.flatnonzero(home == nodes_of[rank]).tolist(), n)
        if mode == "down" and nodes_of[rank] == 1:
            bitmap = None
        client = _FakeClient(bitmap, n)
        paths = ["d/%d" % i for i in range(n)]
        if mode == "table" and rank == 1:
            paths = ["e/%d" % i for i in range(n)]
        s = early or DistributedOrderedSampler(range(n), paths, client=client, seed=11,
                                               locality=True, batch_size=batch, node="node%d" % nodes_of[rank])
        epochs, error = [], None
        try:
            for e in range(2):
                s.set_epoch(e)
                epochs.append(list(s))
        except DsmountError as e:
            error = str(e)
        with open(out, "w") as f:
            json.dump({"epochs": epochs, "declared": client.declared, "error": error}, f)
    finally:
        dist.destroy_process_group()


def _run_procs(test, targets, timeout=120):
    """Run each (function, args) in a spawned process; fail ``test`` if one
    fails or is still running after ``timeout`` seconds, killing what is
    left either way (a rank stuck in a collective must not hang the
    suite)."""
    import multiprocessing as mp
    import time

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=f, args=a) for f, a in targets]
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        codes = [p.exitcode for p in procs]
        test.assertEqual(codes, [0] * len(procs), "exit codes (None: still running after %ds)" % timeout)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()


@unittest.skipIf(torch is None, "needs torch and numpy")
class SamplerTest(unittest.TestCase):
    def ranks(self, n, batch, nodes_of, mode="ok"):
        """Run _rank_main on len(nodes_of) processes over gloo; their results."""
        import tempfile

        world = len(nodes_of)
        with tempfile.TemporaryDirectory() as d:
            outs = [os.path.join(d, "rank%d.json" % r) for r in range(world)]
            store = os.path.join(d, "store")
            _run_procs(self, [(_rank_main, (r, world, store, n, batch, nodes_of, outs[r], mode)) for r in range(world)])
            res = []
            for o in outs:
                with open(o) as f:
                    res.append(json.load(f))
        return res

    def test_ranks_over_gloo_split_each_global_batch_by_locality(self):
        # 4 ranks on 2 nodes, over torch.distributed (gloo on 127.0.0.1):
        # every rank gathers the nodes' bitmaps and yields its share; the
        # shares of each step make DistributedSampler's global batch, most
        # samples are read on the node that caches them, and each rank
        # declares what it yields (and, as next, what it yields next).
        n, batch, nodes_of = 1000, 16, [0, 1, 0, 1]
        world = len(nodes_of)
        res = self.ranks(n, batch, nodes_of)
        home = locality.home_nodes(np.arange(n), 2)
        for e in range(2):
            lists, want = ds_batches(n, world, 11, e, True, False, batch)
            for k, w in enumerate(want):
                got = Counter(x for r in res for x in r["epochs"][e][k * batch:(k + 1) * batch])
                self.assertEqual(got, w, "epoch %d step %d" % (e, k))
            local = sum(int(np.count_nonzero(home[np.array(r["epochs"][e])] == nodes_of[i])) for i, r in enumerate(res))
            self.assertGreater(local / sum(len(r["epochs"][e]) for r in res), 0.85, "epoch %d" % e)
        for r in res:
            self.assertEqual([x[0] for x in r["declared"]], [0, 1])
            self.assertEqual(r["declared"][0][1], r["epochs"][0])
            self.assertEqual(r["declared"][1][1], r["epochs"][1])
            self.assertEqual(r["declared"][0][2], r["epochs"][1])  # the next epoch, from the same bitmaps

    def test_ranks_disagreeing_on_the_table_all_refuse(self):
        res = self.ranks(200, 8, [0, 1], mode="table")
        for r in res:
            self.assertEqual(r["epochs"], [])
            self.assertIn("disagree on the dataset's paths", r["error"] or "")
            self.assertNotIn("\n", r["error"])

    def test_a_node_whose_daemon_is_down_caches_nothing_for_every_rank(self):
        # Node 1's daemon does not answer: every rank splits as if node 1
        # cached nothing, so the ranks still agree (each step's union is
        # DistributedSampler's) and node 0 still reads its own share.
        n, batch, nodes_of = 600, 8, [0, 1, 0, 1]
        world = len(nodes_of)
        res = self.ranks(n, batch, nodes_of, mode="down")
        _, want = ds_batches(n, world, 11, 0, True, False, batch)
        for k, w in enumerate(want):
            self.assertEqual(Counter(x for r in res for x in r["epochs"][0][k * batch:(k + 1) * batch]), w, "step %d" % k)
        home = locality.home_nodes(np.arange(n), 2)
        node0 = [x for i, r in enumerate(res) if nodes_of[i] == 0 for x in r["epochs"][0]]
        self.assertGreater(np.count_nonzero(home[np.array(node0)] == 0) / len(node0), 0.85)

    def test_a_sampler_built_before_the_group_with_another_rank_is_refused_on_every_rank(self):
        res = self.ranks(100, 4, [0, 1], mode="rank")
        for r in res:
            self.assertEqual(r["epochs"], [])
            self.assertIn("rank 1 has num_replicas 2 and rank 0", r["error"] or "")

    def test_world_unlike_torch_distributed_is_refused_at_construction(self):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.json")
            _run_procs(self, [(_construct_main, (os.path.join(d, "store"), out))])
            with open(out) as f:
                got = json.load(f)
        self.assertIn("world size 1", got[0])
        self.assertIn("batch_size", got[1])


def _construct_main(store, out):
    """Build samplers that must be refused in a group of one; write why."""
    import torch.distributed as dist
    from dsmount import DistributedOrderedSampler

    _init_group(store, 0, 1)
    why = []
    try:
        for kw in ({"num_replicas": 2, "rank": 0, "batch_size": 2}, {"num_replicas": 1, "rank": 0}):
            try:
                DistributedOrderedSampler(range(10), ["d/%d" % i for i in range(10)], client=_FakeClient(None, 10),
                                          locality=True, **kw)
                why.append(None)
            except ValueError as e:
                why.append(str(e))
        with open(out, "w") as f:
            json.dump(why, f)
    finally:
        dist.destroy_process_group()


def _train_main(rank, world, store, root, n, batch, epochs, locality_on, out):
    """One DDP rank training a small CNN (no BatchNorm) on the images
    under root; writes its per-epoch mean losses (the global batch's,
    all-reduced) to out."""
    import torch.distributed as dist
    import torch.nn as nn
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset
    from dsmount import DistributedOrderedSampler

    torch.manual_seed(0)
    torch.set_num_threads(1)
    # float64: the sums over a batch differ in order between the two runs,
    # and SGD amplifies float32's rounding of that within a few epochs.
    torch.set_default_dtype(torch.float64)
    _init_group(store, rank, world)
    try:
        paths = [os.path.join(root, "%d_%d.png" % (i, i % 4)) for i in range(n)]

        class Images(Dataset):
            def __len__(self):
                return n

            def __getitem__(self, i):
                img = np.asarray(Image.open(paths[i]), dtype=np.float64) / 255.0
                return torch.from_numpy(img).permute(2, 0, 1), i % 4

        nodes = world  # one rank a node
        home = locality.home_nodes(np.arange(n), nodes)
        client = _FakeClient(bitmap_of(np.flatnonzero(home == rank).tolist(), n), n)
        client.mountpoint = root
        sampler = DistributedOrderedSampler(Images(), paths, num_replicas=world, rank=rank, seed=3, client=client,
                                            locality=locality_on, batch_size=batch, node="node%d" % rank)
        loader = DataLoader(Images(), batch_size=batch, sampler=sampler)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 4))
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
        losses = []
        for e in range(epochs):
            sampler.set_epoch(e)
            total = torch.zeros(2, dtype=torch.float64)
            for x, y in loader:
                loss = nn.functional.cross_entropy(ddp(x), y, reduction="sum")
                opt.zero_grad()
                (loss / (len(y) * world)).backward()  # DDP averages over ranks: the global batch's mean
                opt.step()
                total += torch.tensor([loss.item(), len(y)], dtype=torch.float64)
            dist.all_reduce(total)
            losses.append(total[0].item() / total[1].item())
        with open(out, "w") as f:
            json.dump(losses, f)
    finally:
        dist.destroy_process_group()


@unittest.skipIf(torch is None, "needs torch and numpy")
class TrainingTest(unittest.TestCase):
    def test_training_follows_the_same_loss_curve_with_locality_on_and_off(self):
        # Two DDP ranks (gloo) train a small CNN without BatchNorm on
        # synthetic images. The global batches are the same with locality
        # on and off, and DDP averages the gradient over the global batch,
        # so the loss curves agree up to the order of floating-point sums
        # (in float64, to 1e-9 over three epochs).
        import tempfile
        from PIL import Image

        n, batch, epochs, world = 256, 8, 3, 2
        rnd = np.random.default_rng(5)
        with tempfile.TemporaryDirectory() as root:
            for i in range(n):
                c = i % 4
                img = rnd.integers(0, 96, size=(16, 16, 3)) + np.array([40 * c, 160 - 40 * c, 80])
                Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(os.path.join(root, "%d_%d.png" % (i, c)))
            curves = {}
            for on in (True, False):
                store = os.path.join(root, "store-%s" % on)
                outs = [os.path.join(root, "loss-%s-%d.json" % (on, r)) for r in range(world)]
                _run_procs(self, [(_train_main, (r, world, store, root, n, batch, epochs, on, outs[r])) for r in range(world)],
                           timeout=300)
                with open(outs[0]) as f:
                    curves[on] = json.load(f)
        on, off = curves[True], curves[False]
        self.assertLess(on[-1], on[0] * 0.9, "the model did not learn: %s" % on)
        for e in range(epochs):
            self.assertAlmostEqual(on[e], off[e], delta=1e-9, msg="epoch %d: %s vs %s" % (e, on, off))


@unittest.skipIf(torch is None, "needs torch and numpy")
class SimulationTest(unittest.TestCase):
    def test_simulated_nodes_hit_with_locality_and_not_without(self):
        from . import sim_nodes

        on = sim_nodes.simulate(4000, 4, 1, 32, 3, 0, True)
        off = sim_nodes.simulate(4000, 4, 1, 32, 3, 0, False)
        self.assertEqual(on[0], 0.0)
        self.assertGreater(min(on[1:]), 0.9)
        self.assertLess(max(off[1:]), 0.6)


if __name__ == "__main__":
    unittest.main()
