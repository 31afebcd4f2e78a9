"""Unit tests of dsmount.OrderedSampler against a fake control entry."""

import logging
import os
import random
import tempfile
import unittest

from dsmount import Client, DsmountError, OrderedSampler, default_job_name

from .fakes import FakeDaemon

try:
    import torch
    from torch.utils.data import DistributedSampler, RandomSampler
except ImportError:  # the pure-Python tests still run
    torch = None

N = 50
PATHS = ["img/%03d.jpg" % i for i in range(N)]


class ShuffleSampler:
    """A sampler without set_epoch: a new random order per iteration."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = random.Random(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        order = list(range(self.n))
        self.rng.shuffle(order)
        return iter(order)


def make(sampler, paths=PATHS, daemon=None, **kw):
    daemon = daemon or FakeDaemon(files=PATHS)
    s = OrderedSampler(sampler, paths, client=Client("/mnt/ds", opener=daemon.opener), **kw)
    return s, daemon


class LookaheadTest(unittest.TestCase):
    def test_declared_next_order_is_what_the_next_epoch_yields(self):
        s, daemon = make(ShuffleSampler(N, seed=1), job="j")
        epochs = [list(s) for _ in range(4)]
        orders = daemon.orders()
        self.assertEqual(len(orders), 4)
        for e, (got, req) in enumerate(zip(epochs, orders)):
            self.assertEqual(req["epoch"], e)
            self.assertEqual(req["job"], "j")
            self.assertEqual(req["paths"], [PATHS[i] for i in got])
            if e + 1 < len(epochs):
                self.assertEqual(req["next"], [PATHS[i] for i in epochs[e + 1]])
        self.assertEqual(s.last_result["declared"], N)
        self.assertEqual(s.last_result["next_declared"], N)

    def test_epochs_are_the_samplers_sequence(self):
        # The lookahead draws one epoch early but yields the same sequence
        # of epochs as the bare sampler.
        bare = ShuffleSampler(N, seed=7)
        want = [list(bare) for _ in range(3)]
        s, _ = make(ShuffleSampler(N, seed=7))
        self.assertEqual([list(s) for _ in range(3)], want)
        self.assertEqual(sorted(want[0]), list(range(N)))

    def test_declared_before_the_first_index(self):
        s, daemon = make(ShuffleSampler(N, seed=2))
        it = iter(s)
        self.assertEqual(len(daemon.orders()), 1)  # declared before any next()
        first = next(it)
        self.assertEqual(daemon.orders()[0]["paths"][0], PATHS[first])

    def test_abandoned_epoch_keeps_the_lookahead(self):
        s, daemon = make(ShuffleSampler(N, seed=3))
        it = iter(s)
        next(it)  # break out of epoch 0 early
        second = list(s)
        self.assertEqual(daemon.orders()[0]["next"], [PATHS[i] for i in second])

    def test_set_epoch_numbers_declarations(self):
        s, daemon = make(ShuffleSampler(N, seed=4))
        s.set_epoch(5)
        list(s)
        list(s)  # no set_epoch: counts on
        s.set_epoch(9)
        list(s)
        self.assertEqual([r["epoch"] for r in daemon.orders()], [5, 6, 9])

    def test_no_next(self):
        s, daemon = make(ShuffleSampler(N, seed=5), declare_next=False)
        list(s)
        self.assertNotIn("next", daemon.orders()[0])
        self.assertEqual(len(s), N)

    def test_plain_list_sampler(self):
        s, daemon = make([3, 1, 2])
        self.assertEqual(list(s), [3, 1, 2])
        self.assertEqual(list(s), [3, 1, 2])
        self.assertEqual(daemon.orders()[0]["next"], [PATHS[3], PATHS[1], PATHS[2]])

    def test_empty_epoch_declares_nothing(self):
        s, daemon = make([])
        self.assertEqual(list(s), [])
        self.assertEqual(daemon.requests, [])


class PathMappingTest(unittest.TestCase):
    def test_callable_and_absolute_paths(self):
        s, daemon = make([2, 0], paths=lambda i: "/mnt/ds/" + PATHS[i])
        self.assertEqual(list(s), [2, 0])
        self.assertEqual(daemon.orders()[0]["paths"], [PATHS[2], PATHS[0]])

    def test_sequence_of_absolute_paths(self):
        s, daemon = make([1], paths=["/mnt/ds/" + p for p in PATHS])
        list(s)
        self.assertEqual(daemon.orders()[0]["paths"], [PATHS[1]])

    def test_mountpoint_needed_for_relative_paths(self):
        with self.assertRaisesRegex(DsmountError, "mountpoint="):
            OrderedSampler([0], PATHS, strict=True)

    def test_not_in_a_mount_passes_through(self):
        with tempfile.TemporaryDirectory() as d:
            files = [os.path.join(d, "a"), os.path.join(d, "b")]
            for f in files:
                open(f, "w").close()
            with self.assertLogs("dsmount", logging.WARNING) as logs:
                s = OrderedSampler(ShuffleSampler(2, seed=0), files)
            self.assertIn("not inside a dsmount mount", logs.output[0])
            self.assertIsNone(s.client)
            self.assertEqual(sorted(s), [0, 1])
            self.assertFalse(s.end())
            with self.assertRaises(DsmountError):
                OrderedSampler([0], files, strict=True)


class FailureTest(unittest.TestCase):
    def test_failure_is_a_warning(self):
        s, daemon = make(ShuffleSampler(N, seed=6), daemon=FakeDaemon(fail="boom"))
        with self.assertLogs("dsmount", logging.WARNING) as logs:
            got = list(s)
        self.assertEqual(sorted(got), list(range(N)))
        self.assertIn("boom", logs.output[0])
        self.assertIsNone(s.last_result)

    def test_path_outside_the_mount_is_a_warning(self):
        s, _ = make([0], paths=["/elsewhere/a.jpg"])
        with self.assertLogs("dsmount", logging.WARNING):
            self.assertEqual(list(s), [0])

    def test_unreachable_mount_is_a_warning(self):
        s = OrderedSampler([0, 1], PATHS, mountpoint="/nonexistent/dsmount-mount")
        with self.assertLogs("dsmount", logging.WARNING):
            self.assertEqual(list(s), [0, 1])

    def test_strict_raises(self):
        s, _ = make([0], daemon=FakeDaemon(fail="boom"), strict=True)
        with self.assertRaisesRegex(DsmountError, "boom"):
            list(s)
        s, _ = make([0], paths=["/elsewhere/a.jpg"], strict=True)
        with self.assertRaises(DsmountError):
            list(s)

    def test_skipped_paths_are_a_warning(self):
        s, _ = make([0, 1], daemon=FakeDaemon(files=PATHS[:1]))
        with self.assertLogs("dsmount", logging.WARNING) as logs:
            list(s)
        self.assertIn("2 paths skipped", logs.output[0])  # one of this epoch, one of the next
        self.assertEqual(s.last_result["declared"], 1)

    def test_end(self):
        s, daemon = make([0])
        with s:
            list(s)
        self.assertEqual(daemon.jobs, {})
        self.assertEqual(daemon.requests[-1], {"op": "order", "job": s.job, "end": True})


class JobNameTest(unittest.TestCase):
    def test_default_names(self):
        base = default_job_name()
        self.assertRegex(base, r"^.+-\d+$")

        class Ranked:
            rank = 3
        self.assertEqual(default_job_name(Ranked()), base + "-rank3")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchSamplerTest(unittest.TestCase):
    def test_random_sampler(self):
        g = torch.Generator()
        g.manual_seed(0)
        s, daemon = make(RandomSampler(range(N), generator=g))
        epochs = [list(s) for _ in range(3)]
        for e in range(2):
            self.assertEqual(daemon.orders()[e]["next"], [PATHS[i] for i in epochs[e + 1]])
        self.assertNotEqual(epochs[0], epochs[1])

    def test_distributed_shares(self):
        daemon = FakeDaemon(files=PATHS)
        samplers = []
        for rank in range(2):
            ds = DistributedSampler(range(N), num_replicas=2, rank=rank, shuffle=True, seed=11)
            s, _ = make(ds, daemon=daemon)
            self.assertTrue(s.job.endswith("-rank%d" % rank), s.job)
            samplers.append(s)
        yielded = {0: [], 1: []}
        for epoch in range(3):
            for rank, s in enumerate(samplers):
                s.set_epoch(epoch)
                yielded[rank].append(list(s))
            # The two shares partition the dataset.
            both = yielded[0][epoch] + yielded[1][epoch]
            self.assertEqual(sorted(both), list(range(N)))
        for rank, s in enumerate(samplers):
            orders = [r for r in daemon.orders() if r["job"] == s.job]
            self.assertEqual([r["epoch"] for r in orders], [0, 1, 2])
            for e in range(3):
                self.assertEqual(orders[e]["paths"], [PATHS[i] for i in yielded[rank][e]])
                self.assertEqual(len(orders[e]["paths"]), N // 2)
                if e < 2:
                    self.assertEqual(orders[e]["next"], [PATHS[i] for i in yielded[rank][e + 1]])
            self.assertEqual(s.sampler.epoch, 2)  # restored after peeking at epoch 3

    def test_distributed_without_set_epoch_warns(self):
        ds = DistributedSampler(range(N), num_replicas=2, rank=0, shuffle=True)
        s, _ = make(ds)
        list(s)
        with self.assertLogs("dsmount", logging.WARNING) as logs:
            list(s)
        self.assertIn("set_epoch", logs.output[0])

    def test_data_loader(self):
        from torch.utils.data import DataLoader
        g = torch.Generator()
        g.manual_seed(1)
        s, daemon = make(RandomSampler(range(N), generator=g))
        loader = DataLoader(list(range(N)), batch_size=8, sampler=s)
        epochs = [[i for b in loader for i in b.tolist()] for _ in range(2)]
        self.assertEqual(daemon.orders()[0]["next"], [PATHS[i] for i in epochs[1]])
        self.assertEqual(daemon.orders()[1]["paths"], [PATHS[i] for i in epochs[1]])


if __name__ == "__main__":
    unittest.main()
