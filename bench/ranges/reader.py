"""One reader of `go run ./bench ranges` (bench/ranges): nanoGPT's get_batch
over a uint16 token file, every token checked.

Each batch maps the file anew with np.memmap, as nanoGPT's get_batch does
(it recreates the memmap per batch to avoid a memory leak), draws --batch
random start indices from a numpy generator seeded per reader, and copies
out a window of --block + 1 tokens at each (nanoGPT's x and y together).
Every token of a window is checked against the generator's formula:

    token[i] = ((i + seed) * 0x9E3779B97F4A7C15 mod 2**64) >> 48

(bench/ranges/tokens.go writes the file with the same formula), so any
window can be checked without a copy of the file.

With --declare JOB the reader is a declared job instead: on "go" it
declares its next --steps batches with dsmount's NanoGPTWindows (the same
generator and draws) and reads them with its get_batch, sleeping
--work-ms per window after each batch (a training step's work, which
takes no CPU here); "wait" in its answer is the time spent in get_batch.

Protocol with the Go driver: after numpy is imported the reader prints
"ready" and waits for a line "go SECONDS" on stdin; it then reads windows
until SECONDS have passed since that line, counting those it finished in
time, and prints one JSON line: windows, batches, bad windows and the
first bad one. It exits 0 unless it could not run.
"""

import argparse
import json
import sys
import time

import numpy as np

MUL = np.uint64(0x9E3779B97F4A7C15)
SHIFT = np.uint64(48)


def expected(start, base, seed):
    idx = base + np.uint64(start + seed)
    return ((idx * MUL) >> SHIFT).astype(np.uint16)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--path", required=True)
    p.add_argument("--seed", type=int, required=True, help="the token file's seed")
    p.add_argument("--rng-seed", type=int, required=True, help="this reader's numpy generator seed")
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--declare", default="", help="declare the windows as this job's ranges (dsmount.ranges)")
    p.add_argument("--steps", type=int, default=4000, help="batches declared with --declare")
    p.add_argument("--work-ms", type=float, default=0.0, help="sleep per window after each batch (--declare)")
    a = p.parse_args()

    window = a.block + 1
    base = np.arange(window, dtype=np.uint64)
    rng = np.random.default_rng(a.rng_seed)
    # Silence numpy's overflow warnings: the multiply wraps on purpose.
    np.seterr(over="ignore")

    print("ready", flush=True)
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "go":
        print("reader: want 'go SECONDS' on stdin, got %r" % line, file=sys.stderr)
        sys.exit(2)
    seconds = float(line[1])
    t0 = time.monotonic()
    deadline = t0 + seconds

    if a.declare:
        declared(a, base, deadline, t0)
        return

    windows = batches = bad = 0
    first_bad = None
    done = False
    while not done:
        # As get_batch: a new memmap per batch.
        data = np.memmap(a.path, dtype=np.uint16, mode="r")
        ix = rng.integers(0, len(data) - a.block, size=a.batch)
        for i in ix:
            i = int(i)
            w = np.array(data[i:i + window])
            if time.monotonic() > deadline:
                done = True
                break
            if not np.array_equal(w, expected(i, base, a.seed)):
                bad += 1
                if first_bad is None:
                    exp = expected(i, base, a.seed)
                    k = int(np.argmax(w != exp)) if len(w) == window else -1
                    first_bad = {"start_token": i, "len": int(len(w)), "first_diff": k,
                                 "got": int(w[k]) if k >= 0 else None, "want": int(exp[k]) if k >= 0 else None}
            windows += 1
        batches += 1
        del data
    print(json.dumps({"windows": windows, "batches": batches, "bad": bad, "first_bad": first_bad,
                      "elapsed": time.monotonic() - t0}), flush=True)


def declared(a, base, deadline, t0):
    """The --declare reader: dsmount's NanoGPTWindows declares and reads."""
    import os
    from dsmount.ranges import NanoGPTWindows
    n_tokens = os.path.getsize(a.path) // 2
    w = NanoGPTWindows(n_tokens, a.block, a.batch, a.rng_seed)
    res = w.declare(a.path, a.steps, job=a.declare)
    declare_s = time.monotonic() - t0
    windows = batches = bad = 0
    wait = 0.0
    first_bad = None
    while batches < a.steps:
        ix = w.starts(1)[0]
        t = time.monotonic()
        x, y = w.get_batch(a.path)
        wait += time.monotonic() - t
        if t > deadline or time.monotonic() > deadline:
            break
        for k, i in enumerate(ix):
            exp = expected(int(i), base, a.seed).astype(np.int64)
            if not (np.array_equal(x[k], exp[:-1]) and np.array_equal(y[k], exp[1:])):
                bad += 1
                if first_bad is None:
                    first_bad = {"start_token": int(i)}
        windows += len(ix)
        batches += 1
        if a.work_ms > 0:
            time.sleep(a.work_ms * len(ix) / 1000)
    print(json.dumps({"windows": windows, "batches": batches, "bad": bad, "first_bad": first_bad,
                      "elapsed": time.monotonic() - t0, "wait": wait, "declare_s": declare_s,
                      "declared": res.get("declared")}), flush=True)


if __name__ == "__main__":
    main()
