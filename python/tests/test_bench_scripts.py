"""Unit tests of bench/pipeline's scripts: bench_pipeline.py's sampler
(one invocation per epoch must read, and declare, what one invocation of
all the epochs would) and plot_pipeline.py (a PNG from a results file)."""

import json
import os
import sys
import tempfile
import unittest

from dsmount import Client, OrderedSampler

from .fakes import FakeDaemon

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    from . import bench_pipeline
except ImportError:
    bench_pipeline = None

try:
    import matplotlib  # noqa: F401

    from . import plot_pipeline
except ImportError:
    plot_pipeline = None

class DependenciesTest(unittest.TestCase):
    # The script tests below must not pass by being skipped: test/run.sh
    # installs Debian's python3-torch, python3-torchvision and
    # python3-matplotlib.
    def test_present(self):
        self.assertIsNotNone(bench_pipeline, "torch or torchvision is missing")
        self.assertIsNotNone(plot_pipeline, "matplotlib is missing (Debian: python3-matplotlib)")


N = 40
PATHS = ["c/%03d.jpg" % i for i in range(N)]


@unittest.skipIf(bench_pipeline is None, "needs torch and torchvision")
class EpochSamplerTest(unittest.TestCase):
    def test_order_is_a_function_of_seed_and_epoch(self):
        a, b = bench_pipeline.EpochSampler(N, 3), bench_pipeline.EpochSampler(N, 3)
        orders = []
        for e in range(4):
            a.set_epoch(e)
            orders.append(list(a))
            self.assertEqual(sorted(orders[-1]), list(range(N)))
            self.assertEqual(list(a), orders[-1])  # again, the same
        b.set_epoch(2)  # straight to epoch 2: what a later invocation does
        self.assertEqual(list(b), orders[2])
        self.assertEqual(len({tuple(o) for o in orders}), 4)
        c = bench_pipeline.EpochSampler(N, 4)
        c.set_epoch(2)
        self.assertNotEqual(list(c), orders[2])

    def test_one_invocation_per_epoch_declares_like_one_for_all(self):
        # One sampler over epochs 0-2, against three samplers of one epoch
        # each (--first-epoch 0, 1, 2): the same orders, the same next
        # orders declared.
        def run(epochs_per_sampler):
            daemon = FakeDaemon(files=PATHS)
            for first in range(0, 3, epochs_per_sampler):
                s = OrderedSampler(bench_pipeline.EpochSampler(N, 1), PATHS, job="j",
                                   client=Client("/mnt/ds", opener=daemon.opener))
                for e in range(first, first + epochs_per_sampler):
                    s.set_epoch(e)
                    list(s)
            return [(r["epoch"], r["paths"], r.get("next")) for r in daemon.orders()]

        whole, split = run(3), run(1)
        self.assertEqual(whole, split)
        self.assertEqual([e for e, _, _ in whole], [0, 1, 2])
        self.assertEqual(whole[0][2], whole[1][1])  # epoch 0 declared epoch 1's order as next


@unittest.skipIf(plot_pipeline is None, "needs matplotlib")
class PlotTest(unittest.TestCase):
    def test_plot_from_results(self):
        res = {
            "date": "2026-01-01 00:00 UTC", "images": 600, "bytes": 24_000_000, "latency_ms": 20,
            "table": [{"system": s, "workers": w, "cold_images_per_s": 100.0 + w, "hot_images_per_s": 200.0 + w}
                      for s in ("local", "dsmount, declared", "rclone, full VFS cache") for w in (1, 4)],
            "series": {"workers": 4, "epochs": 2, "runs": [
                {"system": "dsmount, declared", "epochs": [{"epoch": 1, "hit_rate": 0.0, "images_per_s": 150.0},
                                                          {"epoch": 2, "hit_rate": 0.45, "images_per_s": 300.0}]}]},
        }
        with tempfile.TemporaryDirectory() as d:
            for name, r in (("both", res), ("table", dict(res, series=None)), ("series", dict(res, table=[]))):
                inp, out = os.path.join(d, name + ".json"), os.path.join(d, name + ".png")
                with open(inp, "w") as f:
                    json.dump(r, f)
                argv = sys.argv
                sys.argv = ["plot_pipeline.py", "--in", inp, "--out", out]
                try:
                    self.assertEqual(plot_pipeline.main(), 0)
                finally:
                    sys.argv = argv
                with open(out, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
