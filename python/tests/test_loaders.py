"""Unit tests of dsmount's sample loaders."""

import io
import os
import random
import tempfile
import unittest

from dsmount import pil_loader, read_bytes

try:
    from PIL import Image
except ImportError:  # test/run.sh installs python3-pil; see test_pil_present
    Image = None


class ReadBytesTest(unittest.TestCase):
    def test_whole_file(self):
        rng = random.Random(7)
        with tempfile.TemporaryDirectory() as d:
            for size in [0, 1, 4095, 4096, 65536 + 3, (1 << 20) - 1, 1 << 20, (1 << 20) + 7, (3 << 20) + 11]:
                with self.subTest(size=size):
                    data = bytes(rng.getrandbits(8) for _ in range(size))
                    p = os.path.join(d, "f%d" % size)
                    with open(p, "wb") as f:
                        f.write(data)
                    self.assertEqual(read_bytes(p), data)

    def test_directory(self):
        with tempfile.TemporaryDirectory() as d, self.assertRaises(IsADirectoryError):
            read_bytes(d)

    def test_missing_file(self):
        with tempfile.TemporaryDirectory() as d, self.assertRaises(FileNotFoundError):
            read_bytes(os.path.join(d, "nope"))


class PilLoaderTest(unittest.TestCase):
    def test_pil_present(self):
        # The image tests must not pass by being skipped.
        self.assertIsNotNone(Image, "Pillow is missing (Debian: python3-pil)")

    def test_same_image_as_pillow(self):
        rng = random.Random(8)
        with tempfile.TemporaryDirectory() as d:
            for fmt, mode, size in [("JPEG", "RGB", (37, 23)), ("PNG", "RGBA", (16, 9)), ("PNG", "L", (5, 40)), ("PNG", "P", (8, 8))]:
                with self.subTest(fmt=fmt, mode=mode):
                    img = Image.new(mode, size)
                    img.putdata([tuple(rng.randrange(256) for _ in range(len(mode))) if len(mode) > 1 else rng.randrange(256)
                                 for _ in range(size[0] * size[1])])
                    p = os.path.join(d, "img.%s" % fmt.lower())
                    img.save(p, fmt)
                    got = pil_loader(p)
                    with open(p, "rb") as f:
                        want = Image.open(f).convert("RGB")  # torchvision's pil_loader
                    self.assertEqual(got.mode, "RGB")
                    self.assertEqual(got.size, size)
                    self.assertEqual(got.tobytes(), want.tobytes())

    def test_not_an_image(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.jpg")
            with open(p, "wb") as f:
                f.write(b"not an image")
            with self.assertRaises(Exception):
                pil_loader(p)


if __name__ == "__main__":
    unittest.main()
