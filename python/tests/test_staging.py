"""Unit tests of dsmount.staging.StagingLoader (CPU always, CUDA if present)."""

import collections
import unittest

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError:
    torch = None

Pair = collections.namedtuple("Pair", "x y")


def batches():
    return [
        (torch.arange(4), {"label": torch.ones(2), "name": ["a", "b"]}),
        Pair(torch.zeros(3), 7),
        [torch.full((2, 2), 5.0)],
    ]


@unittest.skipIf(torch is None, "torch is not installed")
class StagingLoaderTest(unittest.TestCase):
    def check_same(self, got, want, device):
        self.assertEqual(type(got), type(want))
        if isinstance(want, torch.Tensor):
            self.assertEqual(got.device.type, device)
            self.assertTrue(torch.equal(got.cpu(), want))
        elif isinstance(want, dict):
            self.assertEqual(got.keys(), want.keys())
            for k in want:
                self.check_same(got[k], want[k], device)
        elif isinstance(want, (list, tuple)):
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.check_same(g, w, device)
        else:
            self.assertEqual(got, want)

    def test_cpu_passthrough(self):
        from dsmount import StagingLoader
        loader = StagingLoader(batches(), device="cpu")
        got = list(loader)
        self.assertEqual(len(got), 3)
        for g, w in zip(got, batches()):
            self.check_same(g, w, "cpu")

    def test_default_device_without_cuda(self):
        from dsmount import StagingLoader
        if torch.cuda.is_available():
            self.skipTest("CUDA is available")
        want = batches()
        got = list(StagingLoader(want))
        self.assertIs(got[0], want[0])  # nothing to do: yielded as they come

    def test_with_a_data_loader(self):
        from dsmount import StagingLoader
        ds = TensorDataset(torch.arange(20).float(), torch.arange(20))
        loader = DataLoader(ds, batch_size=6, num_workers=0)
        staged = StagingLoader(loader)
        self.assertEqual(len(staged), 4)
        xs = torch.cat([x.cpu() for x, _ in staged])
        self.assertTrue(torch.equal(xs, torch.arange(20).float()))

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "no CUDA")
    def test_cuda(self):
        from dsmount import StagingLoader
        got = list(StagingLoader(batches(), device="cuda"))
        for g, w in zip(got, batches()):
            self.check_same(g, w, "cuda")
        # Many batches, each used on the current stream right away.
        ds = TensorDataset(torch.randn(512, 1024))
        loader = DataLoader(ds, batch_size=32, pin_memory=True)
        total = sum(float(x.sum()) for (x,) in StagingLoader(loader, "cuda"))
        self.assertAlmostEqual(total, float(ds.tensors[0].sum()), delta=1e-2 * 512)


if __name__ == "__main__":
    unittest.main()
