"""Declared ranges through the Python client, run by test/ranges_test.go
against a real mount.

Usage: integration_ranges.py MOUNTED_FILE SOURCE_FILE STEPS

Declares STEPS batches of nanoGPT windows of MOUNTED_FILE (a token file on
a dsmount mount) with dsmount.ranges.NanoGPTWindows.declare, reads them
all with its get_batch, checks every token against SOURCE_FILE (the same
file, outside the mount), then sends declarations the daemon must refuse
whole (a range past the end, of length 0, of a path outside the mount, a
file index past the files) and checks that the job is as it was. Prints
one JSON object: {"declared", "windows", "bad", "refused": [...],
"declared_after"}.
"""

import json
import os
import sys

import numpy as np

import dsmount
from dsmount.ranges import NanoGPTWindows


def job_declared(mp, name):
    for j in dsmount.stats(mp)["mount"]["jobs"] or []:
        if j["name"] == name:
            return j["declared"]
    return None


def main():
    path, source, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mp = dsmount.find_mount_root(path)
    w = NanoGPTWindows.from_file(path, block_size=1024, batch_size=12, seed=5)
    res = w.declare(path, steps, job="tok", epoch=0)
    want = np.memmap(source, dtype=np.uint16, mode="r")
    windows = bad = 0
    for _ in range(steps):
        ix = w.starts(1)[0]
        x, y = w.get_batch(path)
        for k, i in enumerate(ix):
            win = want[i:i + 1025].astype(np.int64)
            if not (np.array_equal(x[k], win[:-1]) and np.array_equal(y[k], win[1:])):
                bad += 1
            windows += 1
    before = job_declared(mp, "tok")
    size = os.path.getsize(path)
    refused = []
    for files, fi, off, ln in (([path], [0], [size - 10], [11]),
                               ([path], [0], [0], [0]),
                               (["/etc/hostname"], [0], [0], [1]),
                               ([path], [1], [0], [1])):
        try:
            dsmount.declare_ranges(files, fi, off, ln, job="tok", epoch=1)
            refused.append("")
        except (dsmount.DsmountError, OSError, ValueError) as e:
            refused.append(str(e))
    json.dump({"declared": res["declared"], "windows": windows, "bad": bad, "refused": refused,
               "declared_before": before, "declared_after": job_declared(mp, "tok")}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
