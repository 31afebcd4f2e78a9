"""Epochs of a real image pipeline over a directory; images/s of each.

Run by test/benchpipeline. torchvision's ImageFolder over --root, decoded
with dsmount.pil_loader (--loader dsmount) or torchvision's default loader
(--loader default), RandomResizedCrop(224) and ToTensor; a DataLoader of
--workers worker processes, batches of --batch, shuffled by a seeded
RandomSampler, pin_memory when CUDA is there. With --declare the sampler
is wrapped in dsmount.OrderedSampler (strict: a failed declaration is an
error), so each epoch's order (and the next one's) is declared to the
mount at --root. Each epoch is timed from the loader's iter() to its last
batch; every epoch must yield every image.

It prints one JSON object: {"images": N, "epochs": [{"seconds": S,
"images": N}, ...], "workers": W, "declared": bool}.

Usage:
  bench_pipeline.py --root DIR [--workers 4] [--epochs 2] [--batch 64]
                    [--declare] [--loader dsmount|default] [--seed 1]
"""

import argparse
import json
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, RandomSampler
from torchvision import datasets, transforms

import dsmount

# More workers than CPUs is part of the experiment on a small machine.
warnings.filterwarnings("ignore", message="This DataLoader will create")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--declare", action="store_true")
    ap.add_argument("--loader", choices=["dsmount", "default"], default="dsmount")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    kw = {"loader": dsmount.pil_loader} if a.loader == "dsmount" else {}
    ds = datasets.ImageFolder(a.root, transform=tf, **kw)
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(a.seed))
    if a.declare:
        sampler = dsmount.OrderedSampler(sampler, [p for p, _ in ds.samples], mountpoint=a.root, strict=True,
                                         job="benchpipeline")
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                        pin_memory=torch.cuda.is_available(), persistent_workers=False)
    epochs = []
    for e in range(a.epochs):
        if a.declare:
            sampler.set_epoch(e)
        n = 0
        t0 = time.perf_counter()
        for x, _ in loader:
            n += x.shape[0]
        epochs.append({"seconds": time.perf_counter() - t0, "images": n})
        if n != len(ds):
            print("bench_pipeline.py: epoch %d yielded %d images of %d" % (e, n, len(ds)), file=sys.stderr)
            return 1
    if a.declare:
        sampler.end()
    print(json.dumps({"images": len(ds), "epochs": epochs, "workers": a.workers, "declared": a.declare}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
