"""Builds the LMDB of `go run ./bench ranges --passes lmdb-...` (bench/ranges,
lmdb.go): --records records, keys b"%08d" % k, record k's bytes a function
of k (below), so that every record read can be checked without a copy.

Record k of seed s (s < 2**16, k < 2**24), with mix the splitmix64
finalizer and base = s << 48 | k << 24:

    length  = min + mix(base | 0xFFFFFF) % (max - min + 1)
    word[j] = mix(base | j)   (uint64, little-endian; the record is the
                               first `length` bytes of the words)

lmdb.go's recordBytes is the same formula. The records are put in key
order (append=True), so their overflow pages follow each other in
data.mdb. After the build, each record's byte range in data.mdb is found
from the address of its value in LMDB's own map (txn.get with buffers):
its distance from record 0's value is its distance in the file, and
record 0's offset is found by searching the file for its first bytes.
Every range is then checked against the file read apart from LMDB. The
table goes to --table: per record, its offset and length, two uint64
little-endian. One JSON line on stdout says what was built.
"""

import argparse
import json
import mmap
import os
import struct
import sys

import lmdb
import numpy as np

from lmdb_records import record, record_len


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True, help="the LMDB's directory (created)")
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--min", type=int, required=True, help="smallest record, bytes")
    p.add_argument("--max", type=int, required=True, help="largest record, bytes")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--table", required=True, help="where the records' (offset, length) in data.mdb go")
    a = p.parse_args()
    if not (0 <= a.seed < 1 << 16 and 0 < a.records < 1 << 24 and 0 < a.min <= a.max < 1 << 26):
        sys.exit("lmdb_build.py: want seed < 2**16, records < 2**24, 0 < min <= max < 64 MiB")
    np.seterr(over="ignore")  # the multiplies wrap on purpose

    os.makedirs(a.dir, exist_ok=True)
    map_size = a.records * (a.max + 8192) + (64 << 20)
    env = lmdb.open(a.dir, map_size=map_size, subdir=True, lock=False, sync=False, metasync=False)
    per_txn = 500
    for first in range(0, a.records, per_txn):
        with env.begin(write=True) as txn:
            for k in range(first, min(a.records, first + per_txn)):
                if not txn.put(b"%08d" % k, record(a.seed, k, a.min, a.max), append=True):
                    sys.exit("lmdb_build.py: put of record %d refused" % k)
    env.sync(True)
    stat = env.stat()
    env.close()
    for extra in ("lock.mdb",):
        try:
            os.remove(os.path.join(a.dir, extra))
        except FileNotFoundError:
            pass

    data_path = os.path.join(a.dir, "data.mdb")
    env = lmdb.open(a.dir, readonly=True, lock=False, subdir=True)
    addrs = np.zeros(a.records, dtype=np.int64)
    lens = np.zeros(a.records, dtype=np.int64)
    with env.begin(buffers=True) as txn:
        for k in range(a.records):
            buf = txn.get(b"%08d" % k)
            addrs[k] = np.frombuffer(buf, dtype=np.uint8).ctypes.data
            lens[k] = len(buf)
    env.close()

    with open(data_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        rec0 = record(a.seed, 0, a.min, a.max)
        off0 = data.find(rec0[:64])
        if off0 < 0 or data.find(rec0[:64], off0 + 1) >= 0:
            sys.exit("lmdb_build.py: record 0's first bytes found %s in data.mdb" % ("nowhere" if off0 < 0 else "twice"))
        offs = addrs - addrs[0] + off0
        for k in range(a.records):
            o, n = int(offs[k]), int(lens[k])
            if n != record_len(a.seed, k, a.min, a.max) or data[o:o + n] != record(a.seed, k, a.min, a.max):
                sys.exit("lmdb_build.py: record %d is not at offset %d (length %d) of data.mdb" % (k, o, n))
        size = len(data)
    with open(a.table, "wb") as t:
        for k in range(a.records):
            t.write(struct.pack("<QQ", int(offs[k]), int(lens[k])))
    print(json.dumps({"data_bytes": size, "record_bytes": int(lens.sum()), "records": a.records, "page_size": stat["psize"],
                      "depth": stat["depth"], "branch_pages": stat["branch_pages"], "leaf_pages": stat["leaf_pages"],
                      "overflow_pages": stat["overflow_pages"]}), flush=True)


if __name__ == "__main__":
    main()
