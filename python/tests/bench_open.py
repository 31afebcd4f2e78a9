"""Per-file cost of Python's open().read() over a directory, one process.

Run by bench/hot (go run ./bench hot) on both sides of a
comparison, like bench_loader.py, to isolate what the DataLoader pass
measures through many layers: each file is read whole with
`open(path, "rb", buffering=B).read()`. With the default buffering
(B=-1) Python 3.11-3.13 call isatty() on every file, an ioctl that a FUSE
mount forwards to its daemon; B=0 skips it. Stdlib only.

It prints one JSON object on stdout:

  {"files": N, "bytes": ..., "seconds": S, "buffering": B}

after one untimed pass (so the page cache is as warm on both sides) and
--passes timed ones (seconds covers those; files and bytes are per pass).

Usage:
  bench_open.py --root DIR --list FILE [--buffering -1] [--passes 1]
                [--reader open|read_bytes]

--reader read_bytes reads each file with dsmount.read_bytes (this
checkout's python/ package) instead of open(); --buffering is then unused.
"""

import argparse
import json
import os
import sys
import time


def read_all(paths, buffering):
    total = 0
    for p in paths:
        with open(p, "rb", buffering=buffering) as f:
            total += len(f.read())
    return total


def read_all_with(reader):
    def read(paths, _buffering):
        return sum(len(reader(p)) for p in paths)
    return read


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--list", required=True)
    ap.add_argument("--buffering", type=int, default=-1)
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--reader", choices=["open", "read_bytes"], default="open")
    a = ap.parse_args()
    read_all_files = read_all
    if a.reader == "read_bytes":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from dsmount import read_bytes
        read_all_files = read_all_with(read_bytes)
    with open(a.list) as f:
        paths = [os.path.join(a.root, line.rstrip("\n")) for line in f if line.strip()]
    want = sum(os.stat(p).st_size for p in paths)
    if read_all_files(paths, a.buffering) != want:
        print("bench_open.py: untimed pass read the wrong number of bytes", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    for _ in range(a.passes):
        if read_all_files(paths, a.buffering) != want:
            print("bench_open.py: a timed pass read the wrong number of bytes", file=sys.stderr)
            return 1
    seconds = time.perf_counter() - t0
    print(json.dumps({"files": len(paths), "bytes": want, "seconds": seconds / a.passes, "buffering": a.buffering, "reader": a.reader}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
