"""A minimal training loop reading through dsmount, with declared orders.

    dsmount mount s3://bucket/dataset /mnt/data --cache-dir /nvme/cache --cache-size 500G &
    dsmount warm /mnt/data/train            # optional: fill the cache first
    PYTHONPATH=python python3 python/examples/train.py /mnt/data/train --epochs 2

Each sample is one file; its "features" are the histogram of its bytes (a
stand-in for decoding an image), its label the name of its directory. What
matters here is the plumbing:

* ``OrderedSampler`` wraps the sampler and declares each epoch's file order
  (and the next epoch's) to dsmount before the DataLoader reads anything;
* ``StagingLoader`` copies batch i+1 to the GPU on a side stream while the
  step on batch i runs (on a CPU-only machine it passes batches through).

Run it under torchrun to use DistributedSampler: each rank then declares
its own share under its own job name.
"""

import argparse
import os

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

import dsmount
from dsmount.staging import StagingLoader


class ByteHistogramFiles(Dataset):
    """Every file under ``root``; sample i is (byte histogram, label index)."""

    def __init__(self, root):
        self.files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
        classes = sorted({os.path.dirname(f) for f in self.files})
        self.label = {c: i for i, c in enumerate(classes)}
        self.classes = len(classes)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            data = f.read()
        hist = torch.bincount(torch.frombuffer(bytearray(data), dtype=torch.uint8), minlength=256) if data \
            else torch.zeros(256, dtype=torch.long)
        return hist.float() / max(len(data), 1), self.label[os.path.dirname(self.files[i])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="a directory inside a dsmount mount")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()

    distributed = "WORLD_SIZE" in os.environ  # started by torchrun
    if distributed:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")

    ds = ByteHistogramFiles(args.root)
    base = DistributedSampler(ds) if distributed else RandomSampler(ds)
    # ds.files are absolute paths inside the mount: the mountpoint is found
    # from them. A failed declaration is a warning, never a crash.
    sampler = dsmount.OrderedSampler(base, ds.files)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)

    model = torch.nn.Linear(256, ds.classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with sampler:  # ends the job in dsmount when training is done
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            total, n = 0.0, 0
            for x, y in StagingLoader(loader, device):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total, n = total + loss.item() * len(y), n + len(y)
            print("epoch %d: %d samples, loss %.4f, declared %s" % (epoch, n, total / max(n, 1), sampler.last_result))
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
