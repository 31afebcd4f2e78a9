"""One rank of ``go run ./bench nodes``: a data-parallel training job's
reading, without the model.

    bench_nodes.py --rank R --world W --port P --mount MP --node KEY
                   --list FILE --batch B --epochs E [--workers 2]
                   [--locality] [--seed 0] [--job NAME]

The rank joins a torch.distributed gloo group on 127.0.0.1:P, makes a
:class:`dsmount.DistributedOrderedSampler` over the files of ``--list``
(paths relative to the mount, one a line) under its node's mount ``MP``,
declaring to that node's daemon, and reads each epoch through a PyTorch
DataLoader (``--workers`` processes, batch ``B``), with a barrier after
every batch as a step's gradient all-reduce would put one. After each
epoch, rank 0 prints ``done E SECONDS IMAGES`` and waits for a line on its
stdin before the ranks start the next epoch, so that the parent can read
the store's counters between epochs. Rank 0 ends with ``finished``.
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

from dsmount import DistributedOrderedSampler


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return len(f.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--list", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--locality", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--job", default=None)
    a = ap.parse_args()

    with open(a.list, encoding="utf-8") as f:
        rel = [line.rstrip("\n") for line in f if line.strip()]
    paths = [os.path.join(a.mount, p) for p in rel]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=a.rank, world_size=a.world)
    sampler = DistributedOrderedSampler(range(len(paths)), paths, num_replicas=a.world, rank=a.rank, seed=a.seed,
                                        mountpoint=a.mount, job=a.job or "rank%d" % a.rank, strict=True,
                                        locality=a.locality, batch_size=a.batch, node=a.node)
    loader = DataLoader(Files(paths), batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                        persistent_workers=a.workers > 0)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        t0 = time.monotonic()
        images = 0
        for sizes in loader:
            images += len(sizes)
            dist.barrier()
        secs = torch.tensor([time.monotonic() - t0], dtype=torch.float64)
        dist.all_reduce(secs, op=dist.ReduceOp.MAX)
        total = torch.tensor([images], dtype=torch.int64)
        dist.all_reduce(total)
        if a.rank == 0:
            print("done %d %.3f %d" % (epoch, secs.item(), total.item()), flush=True)
            if not sys.stdin.readline():
                raise SystemExit("bench_nodes.py: the parent went away")
        dist.barrier()
    sampler.end()
    dist.destroy_process_group()
    if a.rank == 0:
        print("finished", flush=True)


if __name__ == "__main__":
    main()
