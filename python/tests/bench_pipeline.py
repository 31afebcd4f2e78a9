"""Epochs of a real image pipeline over a directory; images/s of each.

Run by bench/pipeline. torchvision's ImageFolder over --root, decoded
with dsmount.pil_loader (--loader dsmount) or torchvision's default loader
(--loader default), RandomResizedCrop(224) and ToTensor; a DataLoader of
--workers worker processes, batches of --batch, shuffled by a seeded
sampler whose order is a function of (--seed, epoch) alone, pin_memory
when CUDA is there. With --declare the sampler is wrapped in
dsmount.OrderedSampler (strict: a failed declaration is an error), so each
epoch's order (and the next one's) is declared to the mount at --root.
Each epoch is timed from the loader's iter() to its last batch; every
epoch must yield every image.

The epochs run are --first-epoch .. --first-epoch + --epochs - 1, so a
series of invocations of one epoch each (--first-epoch 0, 1, 2, ...) reads
the same orders as one invocation of them all, and declares the same. With
--keep-job the declared job is not ended at exit, so the next invocation's
epoch continues it (the daemon forgets a job only after --job-timeout
without reads).

It prints one JSON object: {"images": N, "epochs": [{"seconds": S,
"images": N}, ...], "workers": W, "declared": bool, "first_epoch": E}.

Usage:
  bench_pipeline.py --root DIR [--workers 4] [--epochs 2] [--batch 64]
                    [--declare] [--loader dsmount|default] [--seed 1]
                    [--first-epoch 0] [--keep-job]
"""

import argparse
import json
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

import dsmount

# More workers than CPUs is part of the experiment on a small machine.
warnings.filterwarnings("ignore", message="This DataLoader will create")


class EpochSampler(torch.utils.data.Sampler):
    """A random permutation of range(n) per epoch, a function of (seed,
    epoch) alone; set_epoch picks the epoch, as with DistributedSampler
    (so OrderedSampler declares the next epoch's order exactly)."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return self.n

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--declare", action="store_true")
    ap.add_argument("--loader", choices=["dsmount", "default"], default="dsmount")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first-epoch", type=int, default=0)
    ap.add_argument("--keep-job", action="store_true")
    a = ap.parse_args()
    if a.epochs < 1 or a.first_epoch < 0:
        print("bench_pipeline.py: want --epochs >= 1 and --first-epoch >= 0", file=sys.stderr)
        return 2
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    kw = {"loader": dsmount.pil_loader} if a.loader == "dsmount" else {}
    ds = datasets.ImageFolder(a.root, transform=tf, **kw)
    sampler = EpochSampler(len(ds), a.seed)
    if a.declare:
        sampler = dsmount.OrderedSampler(sampler, [p for p, _ in ds.samples], mountpoint=a.root, strict=True,
                                         job="benchpipeline")
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                        pin_memory=torch.cuda.is_available(), persistent_workers=False)
    epochs = []
    for e in range(a.first_epoch, a.first_epoch + a.epochs):
        sampler.set_epoch(e)
        n = 0
        t0 = time.perf_counter()
        for x, _ in loader:
            n += x.shape[0]
        epochs.append({"seconds": time.perf_counter() - t0, "images": n})
        if n != len(ds):
            print("bench_pipeline.py: epoch %d yielded %d images of %d" % (e, n, len(ds)), file=sys.stderr)
            return 1
    if a.declare and not a.keep_job:
        sampler.end()
    print(json.dumps({"images": len(ds), "epochs": epochs, "workers": a.workers, "declared": a.declare,
                      "first_epoch": a.first_epoch}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
