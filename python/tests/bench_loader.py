"""Hot-epoch throughput of a real torch DataLoader over a directory.

Run by bench/hot (go run ./bench hot) on both sides of a
comparison: once with --root at the local source directory and once with
--root at a dsmount mount of it. It is plain PyTorch, nothing of dsmount:
a map-style Dataset over the file list whose item i is the bytes of the
i-th file as a uint8 tensor (torch.frombuffer), loaded by
DataLoader(num_workers=W, batch_size=B, shuffle=True) (worker processes,
the default collate), for --warmup untimed epochs then --epochs timed
ones.

It prints one JSON object on stdout:

  {"samples": N, "seconds": S, "bytes": ..., "epoch_seconds": [...],
   "warmup_seconds": [...], ...}

samples / seconds / bytes cover the timed epochs only; each epoch is timed
from the creation of the loader's iterator (which starts the workers) to
its last batch. Every epoch must yield as many samples as there are files
and, in all, the sum of their sizes (taken with os.stat before timing);
otherwise the script exits 1 with the reason on stderr.

Usage:
  bench_loader.py --root DIR --list FILE [--epochs 1] [--warmup 0]
                  [--workers 4] [--batch-size 32] [--seed 0] [--item bytes|len]

FILE holds one path relative to DIR per line.
"""

import argparse
import json
import os
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.dataloader import default_collate

import dsmount

# torch.frombuffer warns that a bytes object is not writable; the tensors are
# only read.
warnings.filterwarnings("ignore", message="The given buffer is not writable")
# More workers than CPUs is the point of the comparison on a small machine.
warnings.filterwarnings("ignore", message="This DataLoader will create")


class FileBytes(Dataset):
    """Item i is the i-th file's bytes (uint8 tensor), or its length."""

    def __init__(self, root, rel_paths, item, buffering=-1, read_bytes=False):
        self.files = [os.path.join(root, p) for p in rel_paths]
        self.item = item
        self.buffering = buffering
        self.read_bytes = read_bytes

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        if self.read_bytes:
            data = dsmount.read_bytes(self.files[i])
        else:
            with open(self.files[i], "rb", buffering=self.buffering) as f:
                data = f.read()
        if self.item == "len":
            return torch.tensor(len(data), dtype=torch.int64)
        return torch.frombuffer(data, dtype=torch.uint8)


def collate(batch):
    """(len(batch), tensor): default_collate (a stacked tensor) when the
    items share a shape, else the items concatenated (files of different
    sizes)."""
    if all(b.shape == batch[0].shape for b in batch):
        return len(batch), default_collate(batch)
    return len(batch), torch.cat(batch)


def run_epoch(loader, item):
    """Returns (seconds, samples, bytes) of one pass over loader."""
    samples = 0
    nbytes = 0
    start = time.perf_counter()
    for n, batch in loader:
        samples += n
        nbytes += int(batch.sum()) if item == "len" else batch.numel()
    return time.perf_counter() - start, samples, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--list", required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--item", choices=["bytes", "len"], default="bytes")
    ap.add_argument("--unbuffered", action="store_true",
                    help="open files with buffering=0 (no isatty() ioctl per open)")
    ap.add_argument("--read-bytes", action="store_true",
                    help="read files with dsmount.read_bytes (no ioctl, no fstat)")
    args = ap.parse_args()

    with open(args.list) as f:
        rel = [line.rstrip("\n") for line in f if line.strip()]
    want_bytes = sum(os.stat(os.path.join(args.root, p)).st_size for p in rel)

    ds = FileBytes(args.root, rel, args.item, 0 if args.unbuffered else -1, args.read_bytes)
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        collate_fn=collate, generator=gen)

    def checked_epoch(label):
        sec, samples, nbytes = run_epoch(loader, args.item)
        if samples != len(rel) or nbytes != want_bytes:
            print(f"{label}: got {samples} samples / {nbytes} bytes, want {len(rel)} / {want_bytes}",
                  file=sys.stderr)
            sys.exit(1)
        return sec

    warm = [checked_epoch(f"warm-up epoch {i}") for i in range(args.warmup)]
    timed = [checked_epoch(f"epoch {i}") for i in range(args.epochs)]
    print(json.dumps({
        "samples": len(rel) * args.epochs,
        "seconds": sum(timed),
        "bytes": want_bytes * args.epochs,
        "epoch_seconds": timed,
        "warmup_seconds": warm,
        "workers": args.workers,
        "batch_size": args.batch_size,
        "item": args.item,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
