"""Each rank declares exactly the files it reads, under PyTorch Lightning and
Hugging Face Accelerate.

Neither framework is packaged in Debian, so the parts of them that decide
which indices a process reads are reproduced here (with torch's own
DataLoader, BatchSampler and DistributedSampler), each modelled on the
framework's source as cited. The ranks run one after the other in this
process (torch.distributed is not initialised): what a rank reads depends
only on its rank, the world size and the epoch.

What the tests show (docs/frameworks.md):

* Lightning, ``use_distributed_sampler=True`` (the default): a DataLoader
  whose sampler is not a ``DistributedSampler`` gets it wrapped in
  ``DistributedSamplerWrapper``, which lists the whole inner sampler and
  keeps this rank's positions. An ``OrderedSampler`` there declares the
  whole epoch on every rank. ``dsmount.DistributedOrderedSampler`` is a
  ``DistributedSampler``, so Lightning leaves it in place, and each rank
  declares exactly what it reads. With ``use_distributed_sampler=False``,
  ``OrderedSampler(DistributedSampler(...))`` does the same.
* Accelerate: ``accelerator.prepare(loader)`` shards the batches after the
  sampler (``BatchSamplerShard``); ``dsmount.follow_accelerate(loader)``
  makes the ``OrderedSampler`` declare this process's batches only.
"""

import logging
import unittest
from unittest import mock

from dsmount import Client, DsmountError, OrderedSampler, follow_accelerate

from .fakes import FakeDaemon

try:
    import torch
    from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, RandomSampler, SequentialSampler

    from dsmount import DistributedOrderedSampler
except ImportError:  # the pure-Python tests elsewhere still run
    torch = None

N = 50
PATHS = ["train/%03d.jpg" % i for i in range(N)]


def client(daemon):
    return Client("/mnt/ds", opener=daemon.opener)


def generator(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def read_indices(loader):
    """The dataset indices a DataLoader over range(n) yields, in order."""
    return [int(i) for batch in loader for i in batch]


def declared(daemon, job):
    """(paths, next paths) of each order declared for job, in order."""
    return [(r["paths"], r.get("next")) for r in daemon.orders() if r["job"] == job]


def paths_of(indices):
    return [PATHS[i] for i in indices]


# --- PyTorch Lightning, reproduced -------------------------------------------
#
# Modelled on Lightning-AI/pytorch-lightning:
#   src/lightning/fabric/utilities/distributed.py (commit 036b499e0e1f):
#     _DatasetSamplerWrapper, DistributedSamplerWrapper;
#   src/lightning/pytorch/trainer/connectors/data_connector.py (commit
#     03f57f9c190f): _DataConnector._requires_distributed_sampler,
#     _prepare_dataloader, _get_distributed_sampler, _process_dataloader
#     (training: shuffle=True; seed from PL_GLOBAL_SEED, default 0);
#   src/lightning/fabric/utilities/data.py: _set_sampler_epoch (set_epoch
#     on loader.sampler and loader.batch_sampler.sampler, each object once).

if torch is not None:
    class LightningSamplerWrapper(DistributedSampler):
        """Lightning's DistributedSamplerWrapper: a DistributedSampler over
        the positions 0..len(sampler)-1 of the wrapped sampler's epoch.
        Each iter() lists the wrapped sampler once (Lightning's
        ``self.dataset.reset()``) and yields the entries at the positions
        DistributedSampler gives this rank: shuffled by seed + epoch, padded
        to a multiple of num_replicas, every num_replicas-th from rank."""

        def __init__(self, sampler, **kwargs):
            self.wrapped = sampler
            super().__init__(range(len(sampler)), **kwargs)

        def __iter__(self):
            drawn = list(self.wrapped)
            return iter([drawn[pos] for pos in super().__iter__()])


def lightning_train_loader(loader, world_size, rank, use_distributed_sampler=True, seed=0):
    """The training DataLoader Lightning's Trainer iterates under DDP."""
    if not use_distributed_sampler or world_size < 2 or isinstance(loader.sampler, DistributedSampler):
        return loader  # left as it is
    kwargs = dict(num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    if isinstance(loader.sampler, (RandomSampler, SequentialSampler)):
        sampler = DistributedSampler(loader.dataset, **kwargs)
    else:
        sampler = LightningSamplerWrapper(loader.sampler, **kwargs)
    # _update_dataloader: the same DataLoader arguments, the new sampler.
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler, drop_last=loader.drop_last)


def lightning_set_epoch(loader, epoch):
    """Lightning's _set_sampler_epoch, called before every training epoch."""
    objects = {}
    if getattr(loader, "sampler", None) is not None:
        objects[id(loader.sampler)] = loader.sampler
    inner = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    if inner is not None:
        objects[id(inner)] = inner
    for obj in objects.values():
        if callable(getattr(obj, "set_epoch", None)):
            obj.set_epoch(epoch)


def lightning_fit(make_loader, world_size, epochs, **kwargs):
    """Run each rank's epochs as Lightning's fit loop does; return
    {rank: (job, [indices read each epoch])}."""
    out = {}
    for rank in range(world_size):
        loader = lightning_train_loader(make_loader(rank), world_size, rank, **kwargs)
        reads = []
        for epoch in range(epochs):
            lightning_set_epoch(loader, epoch)
            reads.append(read_indices(loader))
        out[rank] = (_job_of(loader), reads)
    return out


def _job_of(loader):
    s = loader.sampler
    while not hasattr(s, "job"):
        s = getattr(s, "wrapped", None) or s.sampler
    return s.job


@unittest.skipIf(torch is None, "torch is not installed")
class LightningTest(unittest.TestCase):
    def check_each_rank_declares_what_it_reads(self, fit, epochs, n=N, partition=True):
        for rank, (job, reads) in fit.items():
            decl = declared(self.daemon, job)
            self.assertEqual(len(decl), epochs, "rank %d declared %d epochs" % (rank, len(decl)))
            for e in range(epochs):
                self.assertEqual(decl[e][0], paths_of(reads[e]), "rank %d epoch %d: declared is not what it read" % (rank, e))
                if e + 1 < epochs:
                    self.assertEqual(decl[e][1], paths_of(reads[e + 1]), "rank %d epoch %d: wrong next order" % (rank, e))
        for e in range(epochs):
            shares = [reads[e] for _, reads in fit.values()]
            union = sorted(set(i for s in shares for i in s))
            self.assertEqual(union, list(range(n)), "epoch %d: the ranks' shares are not the epoch" % e)
            if partition:  # no rank declares (reads) another's share
                self.assertEqual(sum(len(s) for s in shares), n)
            self.assertNotEqual(shares[0], [])

    def test_distributed_ordered_sampler_is_left_in_place(self):
        self.daemon = FakeDaemon(files=PATHS)
        world = 2

        def make(rank):
            s = DistributedOrderedSampler(range(N), PATHS, num_replicas=world, rank=rank, seed=3,
                                          client=client(self.daemon))
            return DataLoader(range(N), batch_size=4, sampler=s)

        fit = lightning_fit(make, world, epochs=3)
        for rank, (job, reads) in fit.items():
            self.assertTrue(job.endswith("-rank%d" % rank), job)
            # What Lightning would have put there: a DistributedSampler with
            # the same arguments reads the same indices.
            plain = DistributedSampler(range(N), num_replicas=world, rank=rank, seed=3)
            for e in range(3):
                plain.set_epoch(e)
                self.assertEqual(reads[e], list(plain))
        self.check_each_rank_declares_what_it_reads(fit, 3)

    def test_padding_when_the_ranks_do_not_divide_the_epoch(self):
        # 50 files, 3 ranks: DistributedSampler pads to 51, one file is read
        # (and declared) by two ranks.
        self.daemon = FakeDaemon(files=PATHS)

        def make(rank):
            s = DistributedOrderedSampler(range(N), PATHS, num_replicas=3, rank=rank, client=client(self.daemon))
            return DataLoader(range(N), batch_size=5, sampler=s)

        fit = lightning_fit(make, 3, epochs=2)
        self.check_each_rank_declares_what_it_reads(fit, 2, partition=False)
        self.assertEqual(sum(len(reads[0]) for _, reads in fit.values()), 51)

    def test_without_sampler_replacement(self):
        # Trainer(use_distributed_sampler=False): the DataLoader is the
        # user's, OrderedSampler around DistributedSampler is right.
        self.daemon = FakeDaemon(files=PATHS)

        def make(rank):
            inner = DistributedSampler(range(N), num_replicas=2, rank=rank, seed=5)
            s = OrderedSampler(inner, PATHS, client=client(self.daemon))
            return DataLoader(range(N), batch_size=4, sampler=s)

        fit = lightning_fit(make, 2, epochs=3, use_distributed_sampler=False)
        self.check_each_rank_declares_what_it_reads(fit, 3)

    def test_wrapped_ordered_sampler_declares_the_whole_epoch(self):
        # Why the above are needed: with the default replacement, Lightning
        # wraps OrderedSampler and each rank reads half of what it declared.
        self.daemon = FakeDaemon(files=PATHS)

        def make(rank):
            s = OrderedSampler(RandomSampler(range(N), generator=generator(9)), PATHS, job="r%d" % rank,
                               client=client(self.daemon))
            return DataLoader(range(N), batch_size=4, sampler=s)

        fit = lightning_fit(make, 2, epochs=1)
        for rank, (job, reads) in fit.items():
            decl = declared(self.daemon, job)[0][0]
            self.assertEqual(len(reads[0]), N // 2)
            self.assertEqual(len(decl), N)  # the whole epoch
            self.assertNotEqual(decl, paths_of(reads[0]))

    def test_warns_when_distributed_and_not_sharded(self):
        daemon = FakeDaemon(files=PATHS)
        s = OrderedSampler(RandomSampler(range(N)), PATHS, client=client(daemon))
        with mock.patch("dsmount.sampler._distributed_world_size", return_value=2):
            with self.assertLogs("dsmount", logging.WARNING) as logs:
                list(s)
                list(s)
        self.assertEqual(len(logs.output), 1, logs.output)  # once
        self.assertIn("DistributedOrderedSampler", logs.output[0])
        self.assertIn("docs/frameworks.md", logs.output[0])

    def test_no_warning_when_sharded(self):
        daemon = FakeDaemon(files=PATHS)
        samplers = [
            OrderedSampler(DistributedSampler(range(N), num_replicas=2, rank=0), PATHS, client=client(daemon)),
            DistributedOrderedSampler(range(N), PATHS, num_replicas=2, rank=1, client=client(daemon)),
            OrderedSampler(RandomSampler(range(N)), PATHS, client=client(daemon), share=lambda idx: idx[::2]),
        ]
        with mock.patch("dsmount.sampler._distributed_world_size", return_value=2):
            with mock.patch.object(logging.getLogger("dsmount.sampler"), "warning") as warning:
                for s in samplers:
                    s.set_epoch(0)
                    list(s)
        warning.assert_not_called()

    def test_single_process_does_not_warn(self):
        daemon = FakeDaemon(files=PATHS)
        s = OrderedSampler(RandomSampler(range(N)), PATHS, client=client(daemon))
        with mock.patch("dsmount.sampler._distributed_world_size", return_value=1):
            with mock.patch.object(logging.getLogger("dsmount.sampler"), "warning") as warning:
                list(s)
        warning.assert_not_called()


@unittest.skipIf(torch is None, "torch is not installed")
class DistributedOrderedSamplerTest(unittest.TestCase):
    def test_is_a_distributed_sampler_with_the_same_indices(self):
        daemon = FakeDaemon(files=PATHS)
        s = DistributedOrderedSampler(range(N), PATHS, num_replicas=4, rank=2, shuffle=True, seed=7, drop_last=True,
                                      client=client(daemon))
        plain = DistributedSampler(range(N), num_replicas=4, rank=2, shuffle=True, seed=7, drop_last=True)
        self.assertIsInstance(s, DistributedSampler)
        self.assertEqual(len(s), len(plain))
        for e in range(3):
            s.set_epoch(e)
            plain.set_epoch(e)
            got = list(s)
            self.assertEqual(got, list(plain))
            self.assertEqual(s.epoch, e)  # not moved by peeking at the next epoch
            self.assertEqual(s.last_result["declared"], len(got))
        orders = daemon.orders()
        self.assertEqual([r["epoch"] for r in orders], [0, 1, 2])
        plain.set_epoch(3)
        self.assertEqual(orders[2]["next"], paths_of(list(plain)))
        self.assertTrue(s.job.endswith("-rank2"), s.job)
        self.assertTrue(s.end())
        self.assertEqual(s.mountpoint, "/mnt/ds")

    def test_not_shuffled(self):
        daemon = FakeDaemon(files=PATHS)
        s = DistributedOrderedSampler(range(N), PATHS, num_replicas=2, rank=1, shuffle=False, job="j",
                                      client=client(daemon))
        self.assertEqual(list(s), list(range(1, N, 2)))
        self.assertEqual(daemon.orders()[0]["paths"], paths_of(range(1, N, 2)))
        self.assertEqual(s.job, "j")

    def test_missing_set_epoch_warns(self):
        s = DistributedOrderedSampler(range(N), PATHS, num_replicas=2, rank=0, client=client(FakeDaemon(files=PATHS)))
        list(s)
        with self.assertLogs("dsmount", logging.WARNING) as logs:
            list(s)
        self.assertIn("set_epoch", logs.output[0])

    def test_context_manager_ends_the_job(self):
        daemon = FakeDaemon(files=PATHS)
        with DistributedOrderedSampler(range(N), PATHS, num_replicas=2, rank=0, job="k", client=client(daemon)) as s:
            list(s)
            self.assertIn("k", daemon.jobs)
        self.assertNotIn("k", daemon.jobs)


# --- Hugging Face Accelerate, reproduced -------------------------------------
#
# Modelled on huggingface/accelerate src/accelerate/data_loader.py (commit
# 000e52ba473d; the same in later versions read): BatchSamplerShard
# (_iter_with_no_split, _iter_with_split) and prepare_data_loader's path for
# a map-style dataset without dispatch_batches: the DataLoader's own
# batch_sampler (whose .sampler is the user's sampler) is wrapped in a
# BatchSamplerShard, and a new DataLoader iterates that.

class AccelerateShard:
    """Accelerate's BatchSamplerShard: the batches of ``batch_sampler`` for
    process ``process_index`` of ``num_processes``.

    Without split_batches, batch i goes to process i % num_processes, a
    round of batches being handed out only once its last batch is full; at
    the end (unless drop_last) an unfinished round is completed from the
    first indices of the epoch when even_batches, or the process's pending
    batch is yielded as it is otherwise. With split_batches, every full
    batch is cut into num_processes slices and this process gets its
    slice; a short last batch is completed from the first batch (even) or
    sliced as it is.
    """

    def __init__(self, batch_sampler, num_processes=1, process_index=0, split_batches=False, even_batches=True):
        self.batch_sampler = batch_sampler
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.batch_size = getattr(batch_sampler, "batch_size", None)
        self.drop_last = getattr(batch_sampler, "drop_last", False)

    def __iter__(self):
        return self._split() if self.split_batches else self._whole()

    def _whole(self):
        procs, me, size = self.num_processes, self.process_index, self.batch_size
        head = []  # the first round's indices, to complete the last round
        mine = []  # this process's batch of the current round
        idx, batch = -1, []
        for idx, batch in enumerate(self.batch_sampler):
            if not self.drop_last and idx < procs:
                head += batch
            if idx % procs == me:
                mine = batch
            if idx % procs == procs - 1 and (size is None or len(batch) == size):
                yield mine
                mine = []
        if self.drop_last or not head:
            return
        if not self.even_batches:
            if mine:
                yield mine
            return
        if len(mine) == size:
            yield mine
        while len(head) < procs * size:
            head += head
        if len(batch) == size:  # the last batch was full: it was handed out
            batch = []
            idx += 1
        pos = 0
        while idx % procs != 0 or batch:
            end = pos + size - len(batch)
            batch = batch + head[pos:end]
            if idx % procs == me:
                yield batch
            pos = end
            batch = []
            idx += 1

    def _split(self):
        part = self.batch_size // self.num_processes
        lo, hi = part * self.process_index, part * (self.process_index + 1)
        first, batch = [], []
        for idx, batch in enumerate(self.batch_sampler):
            if idx == 0:
                first = batch
            if len(batch) == self.batch_size:
                yield batch[lo:hi]
        if self.drop_last or not first or len(batch) >= self.batch_size:
            return
        if not self.even_batches:
            if len(batch) > lo:
                yield batch[lo:hi]
            return
        while len(first) < self.batch_size:
            first = first + first
        yield (batch + first)[lo:hi]


class DataLoaderDispatcher:
    """Stands for Accelerate's DataLoaderDispatcher (dispatch_batches=True):
    process 0 iterates the DataLoader and sends each process its part;
    follow_accelerate recognises it by its class name."""

    def __init__(self, loader, process_index):
        self.batch_sampler = loader.batch_sampler
        self.sampler = loader.sampler
        self.state = type("State", (), {"process_index": process_index})()


def accelerate_prepare(loader, num_processes, process_index, split_batches=False, even_batches=True):
    """accelerator.prepare(loader) for a map-style dataset."""
    shard = AccelerateShard(loader.batch_sampler, num_processes=num_processes, process_index=process_index,
                            split_batches=split_batches, even_batches=even_batches)
    return DataLoader(loader.dataset, batch_sampler=shard)


@unittest.skipIf(torch is None, "torch is not installed")
class AccelerateTest(unittest.TestCase):
    def run_processes(self, n, procs, batch_size, drop_last=False, split_batches=False, even_batches=True,
                      epochs=3, follow=True):
        """Each process's (job, [indices read each epoch]) and the daemon."""
        paths = PATHS[:n]
        daemon = FakeDaemon(files=paths)
        out = {}
        for p in range(procs):
            # The same generator seed on every process, as Accelerate keeps
            # it (it synchronises the sampler's generator: see test_generator).
            s = OrderedSampler(RandomSampler(range(n), generator=generator(21)), paths, job="p%d" % p,
                               client=client(daemon))
            loader = accelerate_prepare(DataLoader(range(n), batch_size=batch_size, sampler=s, drop_last=drop_last),
                                        procs, p, split_batches=split_batches, even_batches=even_batches)
            if follow:
                self.assertIs(follow_accelerate(loader), s)
            out[p] = (s.job, [read_indices(loader) for _ in range(epochs)])
        return out, daemon

    def test_each_process_declares_what_it_reads(self):
        cases = [
            dict(n=48, procs=2, batch_size=4),                      # even rounds
            dict(n=50, procs=2, batch_size=4),                      # last round completed from the start
            dict(n=50, procs=3, batch_size=4, even_batches=False),
            dict(n=50, procs=3, batch_size=4, drop_last=True),
            dict(n=50, procs=2, batch_size=4, split_batches=True),
            dict(n=50, procs=2, batch_size=4, split_batches=True, even_batches=False),
            dict(n=5, procs=4, batch_size=4),                       # fewer indices than one round
        ]
        for case in cases:
            with self.subTest(**case):
                out, daemon = self.run_processes(**case)
                n = case["n"]
                reads_by_epoch = []
                for p, (job, reads) in out.items():
                    decl = declared(daemon, job)
                    self.assertEqual(len(decl), 3)
                    for e in range(3):
                        self.assertEqual(decl[e][0], paths_of(reads[e]), "process %d epoch %d" % (p, e))
                        if e < 2:
                            self.assertEqual(decl[e][1], paths_of(reads[e + 1]), "process %d next of %d" % (p, e))
                for e in range(3):
                    union = set(i for _, reads in out.values() for i in reads[e])
                    if not case.get("drop_last"):
                        self.assertEqual(union, set(range(n)), "epoch %d is not covered" % e)
                    if n == 48:  # even rounds: the processes' shares partition the epoch
                        self.assertEqual(sum(len(reads[e]) for _, reads in out.values()), n)

    def test_without_follow_every_process_declares_the_whole_epoch(self):
        out, daemon = self.run_processes(n=48, procs=2, batch_size=4, epochs=1, follow=False)
        for p, (job, reads) in out.items():
            self.assertEqual(len(reads[0]), 24)
            self.assertEqual(len(declared(daemon, job)[0][0]), 48)

    def test_single_process(self):
        daemon = FakeDaemon(files=PATHS)
        s = OrderedSampler(RandomSampler(range(N), generator=generator(1)), PATHS, client=client(daemon))
        loader = DataLoader(range(N), batch_size=8, sampler=s, drop_last=True)  # not sharded
        self.assertIs(follow_accelerate(loader), s)
        reads = read_indices(loader)
        self.assertEqual(len(reads), 48)
        self.assertEqual(daemon.orders()[0]["paths"], paths_of(reads))  # without the dropped 2

    def test_sampler_is_a_batch_sampler(self):
        # DataLoader(ds, sampler=BatchSampler(...), batch_size=None):
        # Accelerate shards the DataLoader's sampler.
        daemon = FakeDaemon(files=PATHS)
        s = OrderedSampler(RandomSampler(range(N), generator=generator(4)), PATHS, client=client(daemon))
        shard = AccelerateShard(BatchSampler(s, 5, False), num_processes=2, process_index=1)
        loader = DataLoader(range(N), sampler=shard, batch_size=None)
        self.assertIs(follow_accelerate(loader), s)
        reads = [i for batch in shard for i in batch]
        self.assertEqual(daemon.orders()[0]["paths"], paths_of(reads))

    def test_dispatcher(self):
        daemon = FakeDaemon(files=PATHS)
        jobs = []
        for p in range(2):
            s = OrderedSampler(RandomSampler(range(N), generator=generator(2)), PATHS, job="d%d" % p,
                               client=client(daemon))
            loader = DataLoaderDispatcher(DataLoader(range(N), batch_size=4, sampler=s), process_index=p)
            self.assertIs(follow_accelerate(loader), s)
            list(s)
            jobs.append(s.job)
        self.assertEqual(len(declared(daemon, "d0")), 1)
        self.assertEqual(len(declared(daemon, "d0")[0][0]), N)  # process 0 reads every batch
        self.assertEqual(declared(daemon, "d1"), [])             # the others none

    def test_generator_is_the_wrapped_samplers(self):
        # Accelerate keeps the sampler's generator the same on every
        # process by looking for sampler.generator (setting one if None).
        inner = RandomSampler(range(N))
        s = OrderedSampler(inner, PATHS, mountpoint="/nonexistent")
        self.assertIsNone(s.generator)
        g = generator(3)
        s.generator = g
        self.assertIs(inner.generator, g)
        bare = OrderedSampler(list(range(N)), PATHS, mountpoint="/nonexistent")
        self.assertFalse(hasattr(bare, "generator"))
        with self.assertRaises(AttributeError):
            bare.generator = g

    def test_errors(self):
        daemon = FakeDaemon(files=PATHS)
        plain = DataLoader(range(N), batch_size=4, sampler=RandomSampler(range(N)))
        with self.assertRaisesRegex(DsmountError, "no dsmount.OrderedSampler"):
            follow_accelerate(plain)
        dos = DistributedOrderedSampler(range(N), PATHS, num_replicas=2, rank=0, client=client(daemon))
        loader = accelerate_prepare(DataLoader(range(N), batch_size=4, sampler=dos), 2, 0)
        with self.assertRaisesRegex(DsmountError, "DistributedOrderedSampler"):
            follow_accelerate(loader)


class ShareTest(unittest.TestCase):
    """OrderedSampler(share=...) without torch."""

    def make(self, share, daemon=None, **kw):
        daemon = daemon or FakeDaemon(files=PATHS)
        return OrderedSampler(list(range(N)), PATHS, client=client(daemon), share=share, **kw), daemon

    def test_declares_the_share_and_yields_everything(self):
        s, daemon = self.make(lambda idx: idx[1::2])
        self.assertEqual(list(s), list(range(N)))
        req = daemon.orders()[0]
        self.assertEqual(req["paths"], paths_of(range(1, N, 2)))
        self.assertEqual(req["next"], paths_of(range(1, N, 2)))
        self.assertEqual(s.last_result["declared"], N // 2)

    def test_empty_share_declares_nothing(self):
        s, daemon = self.make(lambda idx: [])
        self.assertEqual(list(s), list(range(N)))
        self.assertEqual(daemon.orders(), [])
        self.assertIsNone(s.last_result)

    def test_failing_share_is_a_failed_declaration(self):
        def boom(idx):
            raise RuntimeError("boom")
        s, daemon = self.make(boom)
        with self.assertLogs("dsmount", logging.WARNING) as logs:
            self.assertEqual(list(s), list(range(N)))  # training goes on
        self.assertIn("boom", logs.output[0])
        s, _ = self.make(boom, strict=True)
        with self.assertRaisesRegex(DsmountError, "boom"):
            list(s)

    def test_share_set_later(self):
        s, daemon = self.make(None)
        list(s)
        s.share = lambda idx: idx[:10]
        list(s)
        self.assertEqual(len(daemon.orders()[0]["paths"]), N)
        self.assertEqual(daemon.orders()[1]["paths"], PATHS[:10])


if __name__ == "__main__":
    unittest.main()
