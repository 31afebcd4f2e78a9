"""dsmount's sample loaders in a real DataLoader over a real mount.

Run by test/python_test.go (TestPythonLoaders). With --make it writes
--count images (JPEG and PNG, several sizes and modes, seeded) under
--local and exits. Otherwise it reads every image of --local through
--mount: a DataLoader (--workers worker processes) over a Dataset whose
item is (index, dsmount.pil_loader(path) as bytes, len(dsmount.read_bytes(path))),
and checks each decoded image against Pillow's decoding of the local file
and each byte count against the local size. It prints
{"images": N, "checked": N} and exits 0, or says what differs on stderr
and exits 1.
"""

import argparse
import json
import os
import random
import sys

from PIL import Image


def make(local, count, seed):
    rng = random.Random(seed)
    for i in range(count):
        d = os.path.join(local, "class%02d" % (i % 7))
        os.makedirs(d, exist_ok=True)
        w, h = rng.randrange(8, 200), rng.randrange(8, 200)
        mode = rng.choice(["RGB", "RGB", "L", "RGBA"])
        img = Image.new(mode, (w, h))
        n = len(mode)
        img.putdata([tuple(rng.randrange(256) for _ in range(n)) if n > 1 else rng.randrange(256) for _ in range(w * h)])
        if mode == "RGBA" or rng.random() < 0.3:
            img.save(os.path.join(d, "img%04d.png" % i), "PNG")
        else:
            img.save(os.path.join(d, "img%04d.jpg" % i), "JPEG", quality=rng.randrange(50, 95))


def listing(local):
    rel = []
    for dirpath, _, files in os.walk(local):
        for f in files:
            rel.append(os.path.relpath(os.path.join(dirpath, f), local))
    return sorted(rel)


def check(mount, local, workers):
    import torch
    from torch.utils.data import DataLoader, Dataset

    import dsmount

    rel = listing(local)

    class Images(Dataset):
        def __len__(self):
            return len(rel)

        def __getitem__(self, i):
            p = os.path.join(mount, rel[i])
            img = dsmount.pil_loader(p)
            return i, torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8), len(dsmount.read_bytes(p))

    loader = DataLoader(Images(), batch_size=1, num_workers=workers, collate_fn=lambda b: b[0])
    checked = 0
    for i, pixels, n in loader:
        with open(os.path.join(local, rel[i]), "rb") as f:
            want = Image.open(f).convert("RGB").tobytes()
        if bytes(pixels.numpy()) != want:
            print("%s: decoded through the mount differs from the local file" % rel[i], file=sys.stderr)
            return 1
        if n != os.path.getsize(os.path.join(local, rel[i])):
            print("%s: read_bytes gave %d bytes, the file has %d" % (rel[i], n, os.path.getsize(os.path.join(local, rel[i]))), file=sys.stderr)
            return 1
        checked += 1
    print(json.dumps({"images": len(rel), "checked": checked}))
    return 0 if checked == len(rel) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--local", required=True)
    ap.add_argument("--mount")
    ap.add_argument("--make", action="store_true")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    if a.make:
        make(a.local, a.count, a.seed)
        return 0
    return check(a.mount, a.local, a.workers)


if __name__ == "__main__":
    sys.exit(main())
