"""One reader of the LMDB passes of `go run ./bench ranges` (bench/ranges,
lmdb.go): an image dataset's reader of an LMDB, records read by key in a
random order, every record's bytes checked.

The environment is opened once, read-only and without the lock file (the
mount is read-only), as PyTorch datasets over LMDB do:
lmdb.open(path, readonly=True, lock=False, readahead=...). --readahead 0
is readahead=False: LMDB then madvises its map MADV_RANDOM, what a
random-key reader should ask for; 1 is LMDB's default (readahead=True),
what a job that leaves the defaults gets. Each record is one read
transaction and a txn.get of its key (a copy out of the map), as a
Dataset's __getitem__.

The order is --order's row --reader: --records uint32 keys, little-endian
(the Go driver writes them; the raw GETs read the same rows in the same
order). Record k's bytes are lmdb_build.py's formula.

Protocol with the Go driver, as reader.py's: "ready" once lmdb and numpy
are imported and the environment is open, then "go SECONDS" on stdin, then
one JSON line: records, bytes (the records' bytes read in time), bad
records and the first bad one.
"""

import argparse
import json
import sys
import time

import lmdb
import numpy as np

from lmdb_records import record


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--path", required=True, help="the LMDB's directory")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--min", type=int, required=True)
    p.add_argument("--max", type=int, required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--order", required=True, help="file of readers x records uint32 keys")
    p.add_argument("--reader", type=int, required=True, help="this reader's row of --order")
    p.add_argument("--readahead", type=int, choices=(0, 1), required=True)
    a = p.parse_args()
    np.seterr(over="ignore")  # the multiplies wrap on purpose

    order = np.fromfile(a.order, dtype="<u4", count=a.records, offset=4 * a.records * a.reader)
    if len(order) != a.records:
        sys.exit("lmdb_reader.py: %s has no row %d of %d keys" % (a.order, a.reader, a.records))
    env = lmdb.open(a.path, readonly=True, lock=False, readahead=bool(a.readahead), subdir=True)

    print("ready", flush=True)
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "go":
        print("lmdb_reader.py: want 'go SECONDS' on stdin, got %r" % line, file=sys.stderr)
        sys.exit(2)
    t0 = time.monotonic()
    deadline = t0 + float(line[1])

    records = nbytes = bad = 0
    first_bad = None
    i = 0
    while True:
        k = int(order[i % a.records])
        i += 1
        with env.begin() as txn:
            v = txn.get(b"%08d" % k)
        if time.monotonic() > deadline:
            break
        want = record(a.seed, k, a.min, a.max)
        if v != want:
            bad += 1
            if first_bad is None:
                first_bad = {"key": k, "len": None if v is None else len(v), "want_len": len(want)}
        records += 1
        nbytes += len(want)
    env.close()
    print(json.dumps({"records": records, "bytes": nbytes, "bad": bad, "first_bad": first_bad,
                      "elapsed": time.monotonic() - t0}), flush=True)


if __name__ == "__main__":
    main()
