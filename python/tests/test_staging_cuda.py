"""dsmount.StagingLoader on a CUDA device (skipped, and reported so, without one).

* Staged batches equal the loader's, in its order, through nested tuples,
  lists, dicts and namedtuples, from a plain list and from a DataLoader
  with pin_memory.
* Memory is safe under reuse: each step sleeps on the GPU (much longer
  than the next batches' copies take) before it reads its batch, and the
  loop drops each batch before asking for the next, so the caching
  allocator has the block of batch i free again when it allocates batch
  i+2 on the side stream. Only ``record_stream`` keeps the allocator from
  handing it out while the step on batch i has not run: the same test
  with ``record_stream`` made a no-op must see batch i+2's values where
  batch i's should be (test_reuse_check_fails_without_record_stream), so
  the real test is known to be able to fail.
* The copy of batch i+1 overlaps the step on batch i: CUDA events around
  each batch's copies on the side stream (recorded by wrapping
  StagingLoader._stage) and around each step on the current stream.
"""

import collections
import unittest
from unittest import mock

try:
    import torch
except ImportError:
    torch = None

CUDA = torch is not None and torch.cuda.is_available()

Pair = collections.namedtuple("Pair", "x y")


def sleep_ms(ms):
    """Keep the current stream busy for about ms milliseconds."""
    rate = sleep_ms.cycles_per_ms
    if rate is None:
        # Calibrate once: torch.cuda._sleep spins for a number of cycles.
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        rate = sleep_ms.cycles_per_ms = 10_000_000 / max(a.elapsed_time(b), 1e-3)
    torch.cuda._sleep(int(ms * rate))


sleep_ms.cycles_per_ms = None


@unittest.skipUnless(CUDA, "no CUDA device (torch missing or torch.cuda.is_available() is false)")
class StagingCudaTest(unittest.TestCase):
    def setUp(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def check_same(self, got, want):
        self.assertEqual(type(got), type(want))
        if isinstance(want, torch.Tensor):
            self.assertEqual(got.device.type, "cuda")
            self.assertEqual(got.dtype, want.dtype)
            self.assertTrue(torch.equal(got.cpu(), want.cpu()))
        elif isinstance(want, dict):
            self.assertEqual(list(got.keys()), list(want.keys()))
            for k in want:
                self.check_same(got[k], want[k])
        elif isinstance(want, (list, tuple)):
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.check_same(g, w)
        else:
            self.assertEqual(got, want)

    def test_nested_batches_equal_in_order(self):
        from dsmount import StagingLoader
        g = torch.Generator().manual_seed(7)
        want = []
        for i in range(12):
            x = torch.randn(64, 33, generator=g)
            want.append([
                (x, {"label": torch.full((5,), i), "meta": {"id": i, "name": "b%d" % i}, "pair": Pair(x * 2, [x.int(), "s"])}),
                Pair(torch.arange(i + 1).pin_memory(), i),  # pinned already
                torch.zeros(0),
            ][i % 3])
        got = list(StagingLoader(want, "cuda"))
        self.assertEqual(len(got), len(want))
        for g_, w in zip(got, want):
            self.check_same(g_, w)

    def test_data_loader_pinned(self):
        from torch.utils.data import DataLoader, Dataset
        from dsmount import StagingLoader

        class DS(Dataset):
            def __len__(self):
                return 100

            def __getitem__(self, i):
                return {"x": torch.full((3, 8, 8), i, dtype=torch.uint8), "y": Pair(torch.tensor(i), torch.tensor([i, -i]))}

        order = torch.randperm(100, generator=torch.Generator().manual_seed(3)).tolist()
        loader = DataLoader(DS(), batch_size=16, sampler=order, num_workers=2, pin_memory=True)
        want = list(DataLoader(DS(), batch_size=16, sampler=order, num_workers=0))
        got = list(StagingLoader(loader, "cuda"))
        self.assertEqual(len(got), len(want))
        for g_, w in zip(got, want):
            self.check_same(g_, w)

    def reuse_errors(self, n=16, mb=32, step_ms=30):
        """Run the reuse scenario; return the batches whose step read
        another batch's values."""
        from dsmount import StagingLoader
        numel = mb * (1 << 20) // 4
        host = [torch.full((numel,), i, dtype=torch.int32).pin_memory() for i in range(n)]
        seen_min = torch.empty(n, dtype=torch.int32, device="cuda")
        seen_max = torch.empty(n, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        # No enumerate(): its reused result tuple would keep batch i alive
        # until the next batch has been staged.
        i = 0
        for x in StagingLoader(host, "cuda"):
            sleep_ms(step_ms)  # the step runs long after the host has moved on
            seen_min[i], seen_max[i] = x.min(), x.max()
            del x  # free the block now: the allocator may hand it out for batch i+2
            i += 1
        self.assertEqual(i, n)
        torch.cuda.synchronize()
        lo, hi = seen_min.cpu().tolist(), seen_max.cpu().tolist()
        return [(i, lo[i], hi[i]) for i in range(n) if lo[i] != i or hi[i] != i]

    def test_reuse_is_safe(self):
        self.assertEqual(self.reuse_errors(), [], "steps read batches overwritten by later copies")

    def test_reuse_check_fails_without_record_stream(self):
        # The same scenario with record_stream a no-op: the allocator reuses
        # a batch's block for a later copy before the step reading it ran.
        with mock.patch.object(torch.Tensor, "record_stream", lambda self, stream: None):
            bad = self.reuse_errors()
        self.assertTrue(bad, "without record_stream every step still read its own batch: the reuse test can't fail")

    def test_copy_overlaps_step(self):
        from dsmount import StagingLoader
        from dsmount import staging
        copies = []
        orig = staging.StagingLoader._stage

        def timed(self, host, side):
            start = torch.cuda.Event(enable_timing=True)
            start.record(side)
            dev, done = orig(self, host, side)
            end = torch.cuda.Event(enable_timing=True)
            end.record(side)
            copies.append((start, end))
            return dev, done

        # Big enough that a copy takes milliseconds (512 MiB: 10-20 ms over
        # PCIe 5 or 4, 1-2 ms over NVLink-C2C), the step several times that.
        host = [torch.full((128 << 20,), i, dtype=torch.float32).pin_memory() for i in range(5)]
        steps = []
        sleep_ms(1)  # calibrate outside the timed loop
        torch.cuda.synchronize()
        with mock.patch.object(staging.StagingLoader, "_stage", timed):
            for x in StagingLoader(host, "cuda"):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                sleep_ms(40)
                x.mul_(2)
                b.record()
                steps.append((a, b))
                torch.cuda.synchronize()  # as a loop that logs its loss each step
                del x
        self.assertEqual(len(copies), len(host))
        origin = copies[0][0]
        at = lambda e: origin.elapsed_time(e)  # ms since the first copy began
        overlaps = []
        for i in range(len(host) - 1):
            (s0, s1), (c0, c1) = steps[i], copies[i + 1]
            ov = min(at(s1), at(c1)) - max(at(s0), at(c0))
            overlaps.append((i, round(ov, 3), round(at(c1) - at(c0), 3)))
            self.assertGreater(at(c1) - at(c0), 0.5, "copy %d took under 0.5 ms: too small to show overlap" % (i + 1))
        # Each copy of batch i+1 must run (mostly) while step i runs.
        for i, ov, dur in overlaps:
            self.assertGreater(ov, 0.5 * dur, "copy of batch %d overlapped step %d by %.3f of its %.3f ms; all: %s" % (i + 1, i, ov, dur, overlaps))


if __name__ == "__main__":
    unittest.main()
