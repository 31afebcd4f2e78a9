"""Train-loop check run by test/python_test.go against a real dsmount mount.

It reads a dataset through the mount with a real torch DataLoader (worker
processes) whose sampler is wrapped in dsmount.OrderedSampler, for a few
epochs, and checks that:

* every file read through the mount has the SHA-256 the manifest gives
  (the manifest is made by the Go test from the source directory);
* every epoch yields exactly the order declared for it, and the order
  declared as "next" during an epoch is the one the next epoch yields;
* the daemon accepted every declaration (declared == the epoch's length,
  next_declared likewise).

It prints one JSON object on stdout (the job name, the epochs' indices and
the daemon's answers) for the Go test to compare with `dsmount stats`. On a
failed check it prints the reason on stderr and exits 1.

Usage:
  integration_train.py --mount MP --manifest FILE [--epochs 2] [--workers 2]
                       [--rank R --world-size W]

Without --rank the sampler is a RandomSampler and the paths given to
OrderedSampler are absolute (the mountpoint is found from them); with --rank
it is a DistributedSampler(num_replicas=W, rank=R) without initialising
torch.distributed, set_epoch is called every epoch, and the paths are a
callable returning relative paths.
"""

import argparse
import hashlib
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

import dsmount


class FileDataset(Dataset):
    """Item i is (i, sha256 hex, size) of the i-th file, read through the mount."""

    def __init__(self, root, rel_paths):
        self.files = [os.path.join(root, p) for p in rel_paths]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            data = f.read()
            # Drop the file from the page cache, so the next epoch's read
            # reaches dsmount again and is counted for the job.
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return i, hashlib.sha256(data).hexdigest(), len(data)


class RecordingClient(dsmount.Client):
    """A Client that also keeps every declaration it sends."""

    def __init__(self, mountpoint):
        super().__init__(mountpoint)
        self.declared = []

    def declare_order(self, job, epoch, paths, next_paths=None):
        res = super().declare_order(job, epoch, paths, next_paths)
        self.declared.append({"epoch": epoch, "paths": list(paths),
                              "next": list(next_paths or []), "result": res})
        return res

    def declare_indices(self, job, epoch, table, indices, next_indices=None):
        # The sampler declares by index into its dataset's table: recorded
        # as the paths the indices name.
        res = super().declare_indices(job, epoch, table, indices, next_indices)
        self.declared.append({"epoch": epoch, "paths": [table.paths[i] for i in indices],
                              "next": [table.paths[i] for i in (next_indices or [])], "result": res})
        return res


def fail(msg):
    print("integration_train: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    with open(args.manifest) as f:
        manifest = json.load(f)
    rel, want = manifest["paths"], manifest["sha256"]
    ds = FileDataset(args.mount, rel)
    distributed = args.rank is not None

    if distributed:
        base = DistributedSampler(ds, num_replicas=args.world_size, rank=args.rank,
                                  shuffle=True, seed=args.seed)
        sampler = dsmount.OrderedSampler(base, lambda i: rel[i], mountpoint=args.mount, strict=True)
    else:
        g = torch.Generator()
        g.manual_seed(args.seed)
        base = RandomSampler(ds, generator=g)
        # Absolute paths inside the mount; the mountpoint is found from them.
        sampler = dsmount.OrderedSampler(base, ds.files, strict=True)
        if sampler.mountpoint != os.path.abspath(args.mount):
            fail("OrderedSampler found mountpoint %s, want %s" % (sampler.mountpoint, args.mount))
    sampler.client = RecordingClient(sampler.mountpoint)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers)

    epochs, files_read, bytes_read = [], 0, 0
    for epoch in range(args.epochs):
        if distributed:
            sampler.set_epoch(epoch)
        order = []
        for idx, digest, size in loader:
            for i, d, n in zip(idx.tolist(), digest, size.tolist()):
                if d != want[i]:
                    fail("epoch %d: %s read through the mount has sha256 %s, the source has %s" % (epoch, rel[i], d, want[i]))
                order.append(i)
                files_read += 1
                bytes_read += n
        epochs.append(order)

    declared = sampler.client.declared
    if len(declared) != args.epochs:
        fail("%d declarations for %d epochs" % (len(declared), args.epochs))
    share = len(sampler)
    for e, (order, dec) in enumerate(zip(epochs, declared)):
        if len(order) != share or len(set(order)) != share:
            fail("epoch %d yielded %d indices (%d distinct), want %d" % (e, len(order), len(set(order)), share))
        if dec["epoch"] != e:
            fail("epoch %d was declared as epoch %d" % (e, dec["epoch"]))
        if dec["paths"] != [rel[i] for i in order]:
            fail("epoch %d: the yielded order differs from the declared one" % e)
        if e > 0 and declared[e - 1]["next"] != dec["paths"]:
            fail("epoch %d: the order declared as next during epoch %d differs from the one yielded" % (e, e - 1))
        r = dec["result"]
        if r["declared"] != share or r["next_declared"] != share or r["skipped"] or r["duplicates"]:
            fail("epoch %d: the daemon answered %s; want %d declared and next_declared, nothing skipped" % (e, r, share))
    if not distributed and any(sorted(o) != list(range(len(ds))) for o in epochs):
        fail("an epoch of the RandomSampler did not read every file once")

    json.dump({
        "job": sampler.job,
        "pid": os.getpid(),
        "mountpoint": sampler.mountpoint,
        "share": share,
        "epochs": epochs,
        "results": [d["result"] for d in declared],
        "files_read": files_read,
        "bytes_read": bytes_read,
        "torch": torch.__version__,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
