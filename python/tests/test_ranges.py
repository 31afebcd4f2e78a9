"""dsmount.ranges: the declared byte ranges are the bytes the frameworks'
own indexing reads, in order.

Every test writes its files in the framework's format in a temporary
directory and compares the adapter's ranges, read back from the file, with
a plain per-sample reimplementation of the framework's reading code.
"""

import os
import struct
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover - the suite installs numpy (with torch)
    np = None

if np is not None:
    from dsmount.ranges import (MegatronIndex, NanoGPTWindows, check_ranges, megatron_ranges, nanogpt_windows,
                                olmo_ranges)


class DependenciesTest(unittest.TestCase):
    def test_present(self):
        # Not to pass by being skipped: test/run.sh installs numpy.
        self.assertIsNotNone(np, "numpy is missing")


class TmpDir(unittest.TestCase):
    def setUp(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.tmp = d.name

    def path(self, name):
        return os.path.join(self.tmp, name)


def read_ranges(path, offsets, lengths):
    with open(path, "rb") as f:
        out = []
        for off, ln in zip(offsets.tolist(), lengths.tolist()):
            f.seek(off)
            out.append(f.read(ln))
    return out


# ---- nanoGPT ---------------------------------------------------------------


@unittest.skipIf(np is None, "numpy is not installed")
class NanoGPTTest(TmpDir):
    N, BLOCK, BATCH = 5000, 64, 6

    def setUp(self):
        super().setUp()
        self.bin = self.path("train.bin")
        np.random.default_rng(99).integers(0, 50257, self.N, dtype=np.uint16).tofile(self.bin)

    def test_get_batch_reads_the_declared_windows_in_order(self):
        w = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=1337)
        offsets, lengths = w.ranges(7)  # declared before the first read
        self.assertEqual(offsets.dtype, np.int64)
        self.assertEqual(lengths.dtype, np.int64)
        self.assertEqual(len(offsets), 7 * self.BATCH)
        self.assertTrue((lengths == (self.BLOCK + 1) * 2).all())
        windows = [np.frombuffer(b, dtype=np.uint16).astype(np.int64) for b in read_ranges(self.bin, offsets, lengths)]
        for step in range(7):
            x, y = w.get_batch(self.bin)
            self.assertEqual(x.shape, (self.BATCH, self.BLOCK))
            self.assertEqual(x.dtype, np.int64)
            for r in range(self.BATCH):
                win = windows[step * self.BATCH + r]
                np.testing.assert_array_equal(x[r], win[:-1])
                np.testing.assert_array_equal(y[r], win[1:])
        self.assertEqual(w.step, 7)

    def test_declare_sends_the_windows_get_batch_reads(self):
        from unittest import mock
        w = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=3)
        with mock.patch("dsmount.control.declare_ranges", return_value={"declared": 1}) as dr:
            self.assertEqual(w.declare(self.bin, 5, job="tok", epoch=2), {"declared": 1})
        (files, fi, offsets, lengths), kw = dr.call_args
        self.assertEqual(files, [self.bin])
        self.assertEqual(kw, {"job": "tok", "epoch": 2})
        self.assertTrue((np.asarray(fi) == 0).all())
        self.assertEqual(len(offsets), 5 * self.BATCH)
        windows = [np.frombuffer(b, dtype=np.uint16).astype(np.int64) for b in read_ranges(self.bin, offsets, lengths)]
        for step in range(5):
            x, y = w.get_batch(self.bin)
            for r in range(self.BATCH):
                np.testing.assert_array_equal(x[r], windows[step * self.BATCH + r][:-1])

    def test_same_seed_same_windows(self):
        a = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=5)
        b = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=5)
        a.ranges(3)  # drawing ahead in pieces changes nothing
        for _ in range(4):
            xa, ya = a.get_batch(self.bin)
            xb, yb = b.get_batch(self.bin)
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(a.ranges(9)[0], b.ranges(9)[0])
        c = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=6)
        self.assertFalse(np.array_equal(c.ranges(2)[0], nanogpt_windows(self.N, self.BLOCK, self.BATCH, 2, seed=5)[0]))

    def test_function_and_draws(self):
        offsets, lengths = nanogpt_windows(self.N, self.BLOCK, self.BATCH, 4, seed=7, dtype=np.uint16)
        rng = np.random.default_rng(7)  # one integers() call per batch, as get_batch draws
        want = np.concatenate([rng.integers(0, self.N - self.BLOCK, size=self.BATCH) for _ in range(4)])
        np.testing.assert_array_equal(offsets, want * 2)
        self.assertLessEqual(int((offsets + lengths).max()), self.N * 2)
        w = NanoGPTWindows(self.N, self.BLOCK, self.BATCH, seed=7)
        w.get_batch(self.bin)
        np.testing.assert_array_equal(w.ranges(3)[0], offsets[self.BATCH:])  # what is left to read

    def test_from_file_and_itemsize(self):
        self.assertEqual(NanoGPTWindows.from_file(self.bin, self.BLOCK, self.BATCH, seed=0).n_tokens, self.N)
        offsets, lengths = NanoGPTWindows(self.N // 2, self.BLOCK, self.BATCH, seed=0, dtype=np.uint32).ranges(1)
        self.assertTrue((offsets % 4 == 0).all() and (lengths == (self.BLOCK + 1) * 4).all())

    def test_bad_inputs(self):
        with self.assertRaisesRegex(ValueError, "no window"):
            NanoGPTWindows(self.BLOCK, self.BLOCK, 1, seed=0)
        with self.assertRaisesRegex(ValueError, ">= 1"):
            NanoGPTWindows(self.N, 0, 1, seed=0)
        w = NanoGPTWindows(self.N + 1, self.BLOCK, self.BATCH, seed=0)
        with self.assertRaisesRegex(ValueError, "holds 5000 tokens"):
            w.get_batch(self.bin)


# ---- Megatron-LM -------------------------------------------------------------

CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6, np.float32: 7, np.uint16: 8}


def write_megatron(prefix, docs, dtype, version=1, header=b"MMIDIDX\x00\x00", code=None):
    """A .bin and .idx as IndexedDatasetBuilder writes them (one sequence per document)."""
    itemsize = np.dtype(dtype).itemsize
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(np.asarray(d, dtype=dtype).tobytes())
    lengths = np.array([len(d) for d in docs], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) * itemsize
    with open(prefix + ".idx", "wb") as f:
        # header, version, dtype code, sequence count, document count
        code = CODES[dtype] if code is None else code
        f.write(header + struct.pack("<QBQQ", version, code, len(docs), len(docs) + 1))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(np.arange(len(docs) + 1, dtype=np.int64).tobytes())
    return prefix + ".idx", prefix + ".bin"


def build_sample_idx(sizes, document_index, seq_length, extra, drop_last=True):
    """helpers.cpp build_sample_idx, line by line in Python."""
    total = int(sum(sizes[d] for d in document_index))
    if drop_last:
        num_samples = (total - extra) // seq_length
    else:
        num_samples = -(-(total - extra) // seq_length)
    out = [(0, 0)]
    pos, off = 0, 0
    while len(out) <= num_samples:
        remaining = seq_length + extra
        while remaining != 0:
            doc_len = sizes[document_index[pos]] - off
            remaining -= doc_len
            if remaining <= 0:
                off += remaining + doc_len - extra
                remaining = 0
            else:
                if pos == len(document_index) - 1:
                    off = sizes[document_index[pos]] - extra
                    break
                pos += 1
                off = 0
        out.append((pos, off))
    return np.array(out, dtype=np.int32)


def megatron_sample(bin_path, dtype, sizes, pointers, document_index, sample_index, shuffle_index, idx, extra):
    """GPTDataset._query_document_sample_shuffle_indices (without the padding),
    reading through IndexedDataset.get's arithmetic."""
    itemsize = np.dtype(dtype).itemsize
    data = open(bin_path, "rb").read()

    def get(seq, offset=0, length=None):
        if length is None:
            length = sizes[seq] - offset
        return np.frombuffer(data, dtype=dtype, count=length, offset=pointers[seq] + offset * itemsize)

    i = shuffle_index[idx]
    beg, beg_off = sample_index[i]
    end, end_off = sample_index[i + 1]
    if beg == end:
        parts = [get(document_index[beg], beg_off, end_off - beg_off + extra)]
    else:
        parts = []
        for p in range(beg, end + 1):
            parts.append(get(document_index[p], 0 if p > beg else beg_off, None if p < end else end_off + extra))
    return np.concatenate(parts)


@unittest.skipIf(np is None, "numpy is not installed")
class MegatronTest(TmpDir):
    def dataset(self, seed, n_docs, dtype, epochs=1):
        rng = np.random.default_rng(seed)
        docs = [rng.integers(1, 120, int(n), dtype=np.int64) for n in rng.integers(1, 40, n_docs)]
        docs[n_docs // 2] = np.zeros(0, dtype=np.int64)  # an empty document: an empty piece to skip
        idx, bin_path = write_megatron(self.path("ds%d" % seed), docs, dtype)
        sizes = [len(d) for d in docs]
        document_index = np.concatenate([rng.permutation(n_docs) for _ in range(epochs)]).astype(np.int32)
        return idx, bin_path, sizes, document_index, rng

    def check(self, seed, dtype, seq_length, extra, drop_last=True, epochs=1, order=None):
        idx, bin_path, sizes, docidx, rng = self.dataset(seed, 25, dtype, epochs)
        samp = build_sample_idx(sizes, docidx, seq_length, extra, drop_last)
        shuf = rng.permutation(len(samp) - 1).astype(np.uint32)
        offsets, lengths, samples = megatron_ranges(idx, samp, shuf, seq_length, bool(extra), document_index=docidx,
                                                    order=order)
        self.assertEqual((offsets.dtype, lengths.dtype), (np.int64, np.int64))
        self.assertTrue((lengths > 0).all())
        index = MegatronIndex(idx)
        want_order = list(range(len(shuf))) if order is None else list(order)
        self.assertEqual(len(samples), len(offsets))
        self.assertTrue((np.diff(samples) >= 0).all())  # a sample's ranges are consecutive
        got = [[] for _ in want_order]
        for k, b in zip(samples.tolist(), read_ranges(bin_path, offsets, lengths)):
            got[k].append(b)
        for k, j in enumerate(want_order):
            want = megatron_sample(bin_path, dtype, sizes, index.sequence_pointers, docidx, samp, shuf, j, extra)
            np.testing.assert_array_equal(np.frombuffer(b"".join(got[k]), dtype=dtype), want, "sample %d" % j)
            if drop_last:
                self.assertEqual(len(want), seq_length + extra)
        return samp

    def test_samples_match_megatrons_reads(self):
        for seed, dtype, seq, extra in [(1, np.uint16, 16, 1), (2, np.int32, 7, 1), (3, np.uint16, 16, 0),
                                        (4, np.int64, 50, 1), (5, np.uint8, 3, 0)]:
            with self.subTest(seed=seed, dtype=dtype, seq=seq, extra=extra):
                samp = self.check(seed, dtype, seq, extra)
                self.assertGreater((samp[1:, 0] - samp[:-1, 0]).max(), 0)  # some samples span documents

    def test_partial_last_sample_and_epochs(self):
        self.check(6, np.uint16, 16, 1, drop_last=False)
        self.check(7, np.int32, 9, 0, drop_last=False, epochs=3)

    def test_rank_share(self):
        self.check(8, np.uint16, 8, 1, order=[5, 0, 3, 3, 11])

    def test_sample_starting_at_a_document_end(self):
        # Without the extra token a sample that ends a document exactly
        # leaves the next one starting at that document's end: an empty
        # first piece, which Megatron reads as zero tokens.
        idx, bin_path = write_megatron(self.path("exact"), [np.arange(4), np.arange(100, 110)], np.uint16)
        docidx = np.array([0, 1], dtype=np.int32)
        samp = build_sample_idx([4, 10], docidx, 4, 0)
        self.assertEqual(samp[1].tolist(), [0, 4])
        shuf = np.arange(len(samp) - 1)
        offsets, lengths, samples = megatron_ranges(idx, samp, shuf, 4, False, document_index=docidx)
        self.assertEqual(samples.tolist(), [0, 1, 2])
        self.assertEqual(offsets.tolist(), [0, 8, 16])
        self.assertEqual(lengths.tolist(), [8, 8, 8])

    def test_cache_files(self):
        # GPTDataset saves its indices with numpy.save: paths work as arrays do.
        idx, bin_path, sizes, docidx, rng = self.dataset(9, 10, np.uint16)
        samp = build_sample_idx(sizes, docidx, 8, 1)
        shuf = rng.permutation(len(samp) - 1).astype(np.uint32)
        for name, a in (("doc", docidx), ("sample", samp), ("shuffle", shuf)):
            np.save(self.path(name + ".npy"), a)
        got = megatron_ranges(idx, self.path("sample.npy"), self.path("shuffle.npy"), 8,
                              document_index=self.path("doc.npy"))
        want = megatron_ranges(idx, samp, shuf, 8, document_index=docidx)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)

    def test_bad_inputs(self):
        idx, bin_path, sizes, docidx, rng = self.dataset(10, 10, np.uint16)
        samp = build_sample_idx(sizes, docidx, 8, 1)
        shuf = np.arange(len(samp) - 1)

        def ranges(**kw):
            args = dict(idx_path=idx, sample_index=samp, shuffle_index=shuf, seq_length=8, document_index=docidx)
            args.update(kw)
            return megatron_ranges(**args)
        with self.assertRaisesRegex(ValueError, "seq_length"):
            ranges(seq_length=4)
        with self.assertRaisesRegex(ValueError, "shape"):
            ranges(sample_index=samp[:, 0])
        with self.assertRaisesRegex(ValueError, "shuffle_index"):
            ranges(shuffle_index=shuf + 1)
        with self.assertRaisesRegex(ValueError, "order"):
            ranges(order=[len(shuf)])
        with self.assertRaisesRegex(ValueError, "document_index"):
            ranges(document_index=docidx + 100)
        with self.assertRaisesRegex(ValueError, "out of order"):
            ranges(sample_index=samp[::-1].copy())
        with self.assertRaisesRegex(ValueError, "past the end"):
            ranges(bin_size=os.path.getsize(bin_path) - 2)
        for name, kw, msg in (("hdr", dict(header=b"NOTANIDX\x00"), "bad header"), ("ver", dict(version=2), "version"),
                              ("code", dict(code=9), "dtype code")):
            bad, _ = write_megatron(self.path(name), [np.arange(3)], np.uint16, **kw)
            with self.assertRaisesRegex(ValueError, msg):
                MegatronIndex(bad)
        with open(self.path("short.idx"), "wb") as f:
            f.write(open(idx, "rb").read()[:40])
        with self.assertRaisesRegex(ValueError, "too short"):
            MegatronIndex(self.path("short.idx"))


# ---- OLMo --------------------------------------------------------------------


def olmo_instance(paths, chunk_size, dtype, index, partial=False):
    """MemMapDataset.__getitem__: its offsets scan and _read_chunk_from_memmap."""
    item = np.dtype(dtype).itemsize
    offsets, start = [], 0
    for p in paths:
        n = os.path.getsize(p) / (item * chunk_size)
        n = int(np.ceil(n)) if partial else int(n)
        offsets.append((start, start + n))
        start += n
    file = local = None
    for i, (s, e) in enumerate(offsets):
        if s <= index < e:
            file, local = i, index - s
    with open(paths[file], "rb") as f:
        f.seek(local * item * chunk_size)
        return np.frombuffer(f.read(item * chunk_size), dtype=dtype)


@unittest.skipIf(np is None, "numpy is not installed")
class OLMoTest(TmpDir):
    CHUNK = 32

    def files(self, dtype, token_counts):
        paths = []
        for k, n in enumerate(token_counts):
            p = self.path("part-%d-%s.npy" % (k, np.dtype(dtype).name))
            (np.arange(n, dtype=np.int64) + 1000 * k).astype(dtype).tofile(p)
            paths.append(p)
        return paths, [(p, os.path.getsize(p)) for p in paths]

    def check(self, dtype, counts, partial=False):
        paths, paths_sizes = self.files(dtype, counts)
        per_file = [(-(-n // self.CHUNK) if partial else n // self.CHUNK) for n in counts]
        g = np.random.default_rng(3).permutation(sum(per_file)).astype(np.uint32)
        fi, offsets, lengths = olmo_ranges(paths_sizes, self.CHUNK, g, dtype, partial_last_chunk=partial)
        self.assertEqual((fi.dtype, offsets.dtype, lengths.dtype), (np.int32, np.int64, np.int64))
        self.assertEqual(len(fi), len(g))
        for k in range(len(g)):
            with open(paths[fi[k]], "rb") as f:
                f.seek(offsets[k])
                got = np.frombuffer(f.read(lengths[k]), dtype=dtype)
            np.testing.assert_array_equal(got, olmo_instance(paths, self.CHUNK, dtype, int(g[k]), partial))
        return fi, g

    def test_instances_match_olmos_reads(self):
        fi, _ = self.check(np.uint32, [32 * 5 + 7, 10, 32 * 3, 32 * 4 + 31])  # a file of no instance
        self.assertEqual(sorted(set(fi.tolist())), [0, 2, 3])
        self.check(np.uint16, [64, 100, 32 * 7])

    def test_partial_last_chunk(self):
        _, g = self.check(np.uint32, [32 * 2 + 5, 10, 32], partial=True)
        self.assertEqual(len(g), 3 + 1 + 1)

    def test_global_indices_file(self):
        paths, paths_sizes = self.files(np.uint32, [32 * 6, 32 * 2])
        g = np.random.default_rng(4).permutation(8).astype(np.uint32)
        gpath = self.path("global_indices.npy")
        g.tofile(gpath)  # raw uint32, as OLMo's np.memmap(..., mode="w+") writes it
        for a, b in zip(olmo_ranges(paths_sizes, self.CHUNK, gpath), olmo_ranges(paths_sizes, self.CHUNK, g)):
            np.testing.assert_array_equal(a, b)

    def test_bad_inputs(self):
        _, paths_sizes = self.files(np.uint32, [32 * 2, 32])
        with self.assertRaisesRegex(ValueError, "global index 3 outside the 3"):
            olmo_ranges(paths_sizes, self.CHUNK, [0, 3])
        with self.assertRaisesRegex(ValueError, "global index -1"):
            olmo_ranges(paths_sizes, self.CHUNK, [-1])
        with self.assertRaisesRegex(ValueError, "chunk_size"):
            olmo_ranges(paths_sizes, 0, [0])
        with self.assertRaisesRegex(ValueError, "integers"):
            olmo_ranges(paths_sizes, self.CHUNK, [0.5])


# ---- check_ranges ------------------------------------------------------------


@unittest.skipIf(np is None, "numpy is not installed")
class CheckRangesTest(unittest.TestCase):
    def test_good(self):
        fi, off, ln = check_ranges([0, 1, 1], np.array([0, 10, 0], dtype=np.uint64), [5, 6, 16], file_sizes=[5, 16])
        self.assertEqual((fi.dtype, off.dtype, ln.dtype), (np.int32, np.int64, np.int64))
        self.assertEqual(off.tolist(), [0, 10, 0])
        check_ranges([0], [1 << 40], [1], file_sizes=[None])  # size unknown: not bounded
        self.assertEqual(len(check_ranges([], [], [])[0]), 0)

    def test_bad(self):
        for args, kw, msg in [
            (([0], [-1], [4]), {}, "range 0 .*negative offset"),
            (([0, 0], [0, 4], [4, 0]), {}, "range 1 .*length not positive"),
            (([0], [0], [-3]), {}, "length not positive"),
            (([0, 0], [0], [1, 1]), {}, "unequal lengths"),
            (([0, 1], [0, 8], [8, 9]), dict(file_sizes=[100, 16]), r"range 1 .*past the end of its file \(16 bytes\)"),
            (([2], [0], [1]), dict(file_sizes=[10, 10]), "file_index outside the 2 files"),
            (([0], [0], [1]), dict(n_files=0), "outside the 0 files"),
            (([-1], [0], [1]), {}, "negative file_index"),
            (([0], [0], [1]), dict(file_sizes=[1], n_files=2), "n_files is 2 but file_sizes lists 1"),
            (([0], [0.0], [1]), {}, "offsets: want integers"),
            (([[0]], [[0]], [[1]]), {}, "1-D"),
            (([0], [2 ** 64 - 1], [1]), {}, "does not fit in int64"),
        ]:
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(ValueError, msg):
                    check_ranges(*args, **kw)


if __name__ == "__main__":
    unittest.main()
