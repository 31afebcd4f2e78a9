"""dsmount's sample loaders in a real DataLoader over a real mount.

Run by test/python_test.go (TestPythonLoaders). With --make it writes
--count images (JPEG and PNG, several sizes and modes, seeded) in class
directories under --local and exits. Otherwise it reads every image of
--local through --mount: a DataLoader (--workers worker processes) over a
Dataset whose item is (index, dsmount.pil_loader(path) as bytes,
len(dsmount.read_bytes(path))), checking each decoded image against
Pillow's decoding of the local file and each byte count against the local
size; then the short image pipeline (torchvision ImageFolder with
dsmount.pil_loader, RandomResizedCrop(224), ToTensor, batches of 16). It
prints {"images": N, "checked": N, "pipeline_images": N, "classes": C}
and exits 0, or says what differs on stderr and exits 1.
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
    from torchvision import datasets, transforms

    import dsmount

    rel = listing(local)

    # 1. Every image, decoded by dsmount.pil_loader in DataLoader workers
    # through the mount, against Pillow's decoding of the local file; and
    # dsmount.read_bytes's byte count against the local size.
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

    # 2. The pipeline users run: ImageFolder over the mount with
    # dsmount.pil_loader, RandomResizedCrop(224) and ToTensor, batches of
    # 16 from the workers; it must see the same classes and samples as
    # ImageFolder over the local copy.
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    over_mount = datasets.ImageFolder(mount, transform=tf, loader=dsmount.pil_loader)
    over_local = datasets.ImageFolder(local)
    if over_mount.classes != over_local.classes or [(os.path.relpath(p, mount), c) for p, c in over_mount.samples] != \
            [(os.path.relpath(p, local), c) for p, c in over_local.samples]:
        print("ImageFolder over the mount lists other classes or samples than over the local copy", file=sys.stderr)
        return 1
    batches, images = 0, 0
    for x, y in DataLoader(over_mount, batch_size=16, num_workers=workers, shuffle=True):
        if tuple(x.shape[1:]) != (3, 224, 224) or x.shape[0] != y.shape[0]:
            print("pipeline batch of shape %s with %d labels" % (tuple(x.shape), y.shape[0]), file=sys.stderr)
            return 1
        batches += 1
        images += x.shape[0]
    print(json.dumps({"images": len(rel), "checked": checked, "pipeline_images": images, "classes": len(over_mount.classes)}))
    return 0 if checked == len(rel) and images == len(rel) else 1


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
