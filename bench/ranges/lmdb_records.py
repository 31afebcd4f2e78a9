"""Record k of the LMDB passes of `go run ./bench ranges` (bench/ranges,
lmdb.go), shared by lmdb_build.py, which writes the records, and
lmdb_reader.py, which checks them: the formula is lmdb_build.py's
docstring's, and lmdb.go's recordBytes is the same.
"""

import numpy as np

M64 = (1 << 64) - 1
C1, C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
NC1, NC2 = np.uint64(C1), np.uint64(C2)
S30, S27, S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix_int(z):
    z = ((z ^ (z >> 30)) * C1) & M64
    z = ((z ^ (z >> 27)) * C2) & M64
    return z ^ (z >> 31)


def mix_np(z):
    z = (z ^ (z >> S30)) * NC1
    z = (z ^ (z >> S27)) * NC2
    return z ^ (z >> S31)


def record_len(seed, k, lo, hi):
    base = (seed << 48) | (k << 24)
    return lo + mix_int(base | 0xFFFFFF) % (hi - lo + 1)


def record(seed, k, lo, hi):
    """Record k's bytes."""
    n = record_len(seed, k, lo, hi)
    base = np.uint64((seed << 48) | (k << 24))
    words = mix_np(base | np.arange((n + 7) // 8, dtype=np.uint64))
    return words.astype("<u8").tobytes()[:n]
