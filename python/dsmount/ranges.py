"""An epoch's samples as byte ranges of big files, from a job's own order.

Language-model jobs don't read one file per sample: they read windows of a
few large token files, in an order fixed before the epoch starts (a seeded
random draw, or shuffle indices saved to disk). dsmount can prefetch those
windows and keep the soonest-needed ones cached if the job declares them
as three equal-length arrays: ``file_index`` (into a list of files),
``offsets`` and ``lengths`` (bytes). The adapters here compute those arrays
from what the frameworks themselves use to pick samples, so the declared
ranges are the bytes the job will read, in the order it reads them:

* :class:`NanoGPTWindows` / :func:`nanogpt_windows`: nanoGPT's ``get_batch``
  random windows, drawn from a seeded numpy generator ahead of the reads;
* :func:`megatron_ranges`: Megatron-LM / NeMo ``GPTDataset`` samples over an
  indexed dataset's ``.bin`` (its ``.idx`` parsed here);
* :func:`olmo_ranges`: OLMo ``MemMapDataset`` instances over several token
  files, in ``global_indices.npy``'s order.

None of them imports a framework: the few lines of indexing each one needs
are reimplemented below, with the upstream file named where they come from.
:func:`check_ranges` is the input check the declaration will apply.

This module needs numpy (it is not imported by ``import dsmount``).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from itertools import islice
from typing import Any, Deque, Optional, Sequence, Tuple

import numpy as np

from .control import StrPath

#: A numpy array (numpy's types are not analysed here: see pyproject.toml).
Array = Any


def check_ranges(file_index: Any, offsets: Any, lengths: Any, file_sizes: Optional[Sequence[Optional[int]]] = None,
                 n_files: Optional[int] = None) -> Tuple[Array, Array, Array]:
    """Check ranges and return them as ``(int32 file_index, int64 offsets,
    int64 lengths)``.

    A bad range found here is one the daemon would refuse, or a sign that
    the order was computed from the wrong index or file; failing before the
    declaration says which range and why. ``file_sizes[f]`` (None: unknown)
    bounds file ``f``'s ranges; ``n_files`` (default ``len(file_sizes)``)
    bounds ``file_index``. Raises ValueError.
    """
    fi, off, ln = (_int_array(a, name) for a, name in
                   ((file_index, "file_index"), (offsets, "offsets"), (lengths, "lengths")))
    if not len(fi) == len(off) == len(ln):
        raise ValueError("file_index, offsets and lengths have unequal lengths (%d, %d, %d)"
                         % (len(fi), len(off), len(ln)))
    _first_bad(off < 0, "negative offset", fi, off, ln)
    _first_bad(ln <= 0, "length not positive", fi, off, ln)
    if file_sizes is not None:
        if n_files is not None and n_files != len(file_sizes):
            raise ValueError("n_files is %d but file_sizes lists %d files" % (n_files, len(file_sizes)))
        n_files = len(file_sizes)
    if n_files is not None:
        _first_bad((fi < 0) | (fi >= n_files), "file_index outside the %d files" % n_files, fi, off, ln)
    elif len(fi):
        _first_bad(fi < 0, "negative file_index", fi, off, ln)
    if file_sizes is not None and len(fi):
        sizes = np.array([-1 if s is None else int(s) for s in file_sizes], dtype=np.int64)
        size = sizes[fi]
        _first_bad((size >= 0) & (off + ln > size), "range past the end of its file", fi, off, ln, sizes)
    if len(fi) and int(fi.max()) > np.iinfo(np.int32).max:
        raise ValueError("file_index %d does not fit in int32" % int(fi.max()))
    return fi.astype(np.int32), off.astype(np.int64), ln.astype(np.int64)


def _int_array(a: Any, name: str) -> Array:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError("%s: want a 1-D array, got shape %s" % (name, arr.shape))
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError("%s: want integers, got %s" % (name, arr.dtype))
    if arr.dtype == np.uint64 and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError("%s: %d does not fit in int64" % (name, int(arr.max())))
    return arr.astype(np.int64)


def _first_bad(bad: Array, why: str, fi: Array, off: Array, ln: Array, sizes: Optional[Array] = None) -> None:
    if not bad.any():
        return
    k = int(np.argmax(bad))
    msg = "range %d (file_index %d, offset %d, length %d): %s" % (k, fi[k], off[k], ln[k], why)
    if sizes is not None:
        msg += " (%d bytes)" % sizes[fi[k]]
    raise ValueError("%s; %d bad ranges in all" % (msg, int(bad.sum())))


# ---- nanoGPT ---------------------------------------------------------------


class NanoGPTWindows:
    """nanoGPT's random training windows, drawn ahead so they can be declared.

    karpathy/nanoGPT train.py ``get_batch`` draws ``ix = torch.randint(
    len(data) - block_size, (batch_size,))`` per batch and reads tokens
    ``data[i:i+1+block_size]`` at each (x is the first ``block_size``, y the
    last), through a new ``np.memmap`` every batch. Here the starts come
    from ``np.random.default_rng(seed)``, one ``integers(0, n_tokens -
    block_size, batch_size)`` call per batch, and are kept once drawn: the
    windows :meth:`ranges` declares are exactly the ones :meth:`get_batch`
    reads next, however far ahead they were asked for, and two helpers with
    the same arguments draw the same windows.

    A step is one ``get_batch`` call: a micro-batch under gradient
    accumulation. A long run declares a window of steps at a time (the next
    few thousand), not all ``max_iters`` at once.
    """

    def __init__(self, n_tokens: int, block_size: int, batch_size: int, seed: int, dtype: Any = np.uint16) -> None:
        if block_size < 1 or batch_size < 1:
            raise ValueError("block_size and batch_size must be >= 1 (got %d, %d)" % (block_size, batch_size))
        if n_tokens <= block_size:
            raise ValueError("%d tokens hold no window of block_size + 1 = %d" % (n_tokens, block_size + 1))
        self.n_tokens = int(n_tokens)
        self.block_size = int(block_size)
        self.batch_size = int(batch_size)
        self.dtype = np.dtype(dtype)
        self.itemsize: int = self.dtype.itemsize
        self._rng = np.random.default_rng(seed)
        self._drawn: Deque[Array] = deque()  # batches drawn and not read yet, oldest first
        #: Batches read by :meth:`get_batch` so far.
        self.step = 0

    @classmethod
    def from_file(cls, path: StrPath, block_size: int, batch_size: int, seed: int,
                  dtype: Any = np.uint16) -> NanoGPTWindows:
        """The helper for a token file as it is now (its size gives ``n_tokens``)."""
        return cls(os.path.getsize(path) // np.dtype(dtype).itemsize, block_size, batch_size, seed, dtype)

    def starts(self, steps: int) -> Array:
        """The start tokens of the next ``steps`` batches, shape (steps, batch_size)."""
        while len(self._drawn) < steps:
            self._drawn.append(self._rng.integers(0, self.n_tokens - self.block_size, size=self.batch_size,
                                                  dtype=np.int64))
        if steps <= 0:
            return np.empty((0, self.batch_size), dtype=np.int64)
        return np.stack(list(islice(self._drawn, steps)))

    def ranges(self, steps: int) -> Tuple[Array, Array]:
        """``(offsets, lengths)`` in bytes of the next ``steps`` batches'
        windows, in the order :meth:`get_batch` reads them."""
        offsets = self.starts(steps).reshape(-1) * self.itemsize
        lengths = np.full(len(offsets), (self.block_size + 1) * self.itemsize, dtype=np.int64)
        return offsets.astype(np.int64), lengths

    def declare(self, path: StrPath, steps: int, *, job: str, epoch: int = 0) -> Any:
        """Declare the windows of the next ``steps`` batches, as ranges of
        ``path`` (a token file on a dsmount mount), in the order
        :meth:`get_batch` will read them; returns the daemon's ``order``
        result. Declare again, with the next epoch number, before the
        declared steps run out; :func:`dsmount.end_job` ends the job."""
        from .control import declare_ranges
        offsets, lengths = self.ranges(steps)
        return declare_ranges([path], np.zeros(len(offsets), dtype=np.int32), offsets, lengths, job=job, epoch=epoch)

    def get_batch(self, path: StrPath) -> Tuple[Array, Array]:
        """Read the next batch as nanoGPT does: ``(x, y)``, int64 arrays of
        shape (batch_size, block_size), through a new memmap of ``path``."""
        ix = self.starts(1)[0]
        # A new memmap per batch, as nanoGPT does (it avoids a memory leak).
        data: Array = np.memmap(path, dtype=self.dtype, mode="r")
        if len(data) != self.n_tokens:
            raise ValueError("%s holds %d tokens, not the %d the windows were drawn for"
                             % (os.fsdecode(os.fspath(path)), len(data), self.n_tokens))
        b = self.block_size
        x = np.stack([data[i:i + b].astype(np.int64) for i in ix])
        y = np.stack([data[i + 1:i + 1 + b].astype(np.int64) for i in ix])
        del data
        self._drawn.popleft()
        self.step += 1
        return x, y


def nanogpt_windows(n_tokens: int, block_size: int, batch_size: int, steps: int, seed: int,
                    dtype: Any = np.uint16) -> Tuple[Array, Array]:
    """``(offsets, lengths)`` of the first ``steps`` batches a
    ``NanoGPTWindows(n_tokens, block_size, batch_size, seed, dtype)`` reads."""
    return NanoGPTWindows(n_tokens, block_size, batch_size, seed, dtype).ranges(steps)


# ---- Megatron-LM / NeMo ----------------------------------------------------

#: megatron/core/datasets/indexed_dataset.py ``_INDEX_HEADER`` and ``DType`` codes.
_MEGATRON_HEADER = b"MMIDIDX\x00\x00"
_MEGATRON_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
                    7: np.float32, 8: np.uint16}


class MegatronIndex:
    """The parts of a Megatron ``.idx`` file that place tokens in the ``.bin``.

    The layout is ``_IndexReader``'s (megatron/core/datasets/indexed_dataset.py):
    header, version 1 (uint64), dtype code (uint8), sequence count and
    document count (uint64), then int32 sequence lengths (tokens), int64
    sequence pointers (bytes into the ``.bin``) and int64 document indices.
    ``GPTDataset``'s "documents" are the sequences.
    """

    def __init__(self, idx_path: StrPath) -> None:
        self.path = os.fsdecode(os.fspath(idx_path))
        with open(self.path, "rb") as f:
            head = f.read(34)
        if len(head) < 34 or head[:9] != _MEGATRON_HEADER:
            raise ValueError("%s: not a Megatron indexed dataset index (bad header)" % self.path)
        version, code, count, doc_count = struct.unpack("<QBQQ", head[9:])
        if version != 1:
            raise ValueError("%s: index version %d, want 1" % (self.path, version))
        if code not in _MEGATRON_DTYPES:
            raise ValueError("%s: unknown dtype code %d" % (self.path, code))
        self.dtype = np.dtype(_MEGATRON_DTYPES[code])
        need = 34 + count * (4 + 8) + doc_count * 8
        if os.path.getsize(self.path) < need:
            raise ValueError("%s: %d bytes, too short for %d sequences and %d documents"
                             % (self.path, os.path.getsize(self.path), count, doc_count))
        mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        self.sequence_lengths: Array = np.frombuffer(mm, dtype="<i4", count=count, offset=34)
        self.sequence_pointers: Array = np.frombuffer(mm, dtype="<i8", count=count, offset=34 + 4 * count)
        self.document_indices: Array = np.frombuffer(mm, dtype="<i8", count=doc_count, offset=34 + 12 * count)


def megatron_ranges(idx_path: StrPath, sample_index: Any, shuffle_index: Any, seq_length: int,
                    add_extra_token: bool = True, *, document_index: Any, order: Any = None,
                    bin_size: Optional[int] = None) -> Tuple[Array, Array, Array]:
    """The byte ranges of the ``.bin`` that ``GPTDataset`` reads, sample by sample.

    Returns ``(offsets, lengths, samples)``: one range per document piece of
    each sample, and for each range the position in ``order`` of its sample
    (the k-th sample read; a dataset index may recur in ``order``, a
    position can't). The ranges of one sample are consecutive, in reading
    order. ``document_index``, ``sample_index`` and ``shuffle_index`` are
    ``GPTDataset``'s (arrays, or the ``.npy`` files of its index cache);
    ``order`` is the sequence of dataset indices the job asks for (default
    ``0 .. len(shuffle_index) - 1``; a data-parallel rank passes its share).

    Mirrors ``GPTDataset._query_document_sample_shuffle_indices``
    (megatron/core/datasets/gpt_dataset.py): ``i = shuffle_index[j]``; the
    sample runs from ``sample_index[i] = (p, off)`` to ``sample_index[i+1]
    = (q, end)``, positions in ``document_index``; a single document gives
    tokens ``[off, end + extra)``, several give ``[off, len)`` of the first,
    whole middle ones and ``[0, end + extra)`` of the last. Empty pieces
    (a sample starting at its document's end) are left out; padding
    (the last, partial sample) is not read. ``seq_length`` bounds each
    sample, so indices built for another dataset fail here. ``bin_size``
    (default: the size of the ``.bin`` next to the ``.idx``, when present)
    bounds the ranges. Raises ValueError.
    """
    index = MegatronIndex(idx_path)
    docs, samp, shuf = (_load_npy(a) for a in (document_index, sample_index, shuffle_index))
    if samp.ndim != 2 or samp.shape[1] != 2 or len(samp) < 1:
        raise ValueError("sample_index: want shape (num_samples + 1, 2), got %s" % (samp.shape,))
    extra = int(bool(add_extra_token))
    js = np.arange(len(shuf), dtype=np.int64) if order is None else _int_array(order, "order")
    if len(js) and (js.min() < 0 or js.max() >= len(shuf)):
        raise ValueError("order: dataset index outside the %d samples of shuffle_index" % len(shuf))
    ids = np.asarray(shuf[js], dtype=np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(samp) - 1):
        raise ValueError("shuffle_index: sample outside the %d of sample_index" % (len(samp) - 1))
    beg_pos, beg_off = samp[ids, 0].astype(np.int64), samp[ids, 1].astype(np.int64)
    end_pos, end_off = samp[ids + 1, 0].astype(np.int64), samp[ids + 1, 1].astype(np.int64)
    counts = end_pos - beg_pos + 1
    if len(ids) and (counts.min() < 1 or beg_pos.min() < 0 or end_pos.max() >= len(docs)):
        raise ValueError("sample_index: a sample's document positions are out of order or outside document_index")
    # One row per (sample, document piece), samples in order.
    first = np.cumsum(counts) - counts
    k = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    pos = np.repeat(beg_pos, counts) + k
    doc = np.asarray(docs[pos], dtype=np.int64)
    if len(doc) and (doc.min() < 0 or doc.max() >= len(index.sequence_lengths)):
        raise ValueError("document_index: sequence outside the %d of %s" % (len(index.sequence_lengths), index.path))
    seq_len = index.sequence_lengths[doc].astype(np.int64)
    start = np.where(k == 0, np.repeat(beg_off, counts), 0)
    stop = np.where(k == np.repeat(counts - 1, counts), np.repeat(end_off + extra, counts), seq_len)
    if len(doc) and ((start < 0) | (stop < start) | (stop > seq_len)).any():
        raise ValueError("sample_index: a sample's token offsets fall outside its documents (an index built for "
                         "another dataset, or add_extra_token wrong?)")
    per_sample = np.add.reduceat(stop - start, first) if len(doc) else np.zeros(0, dtype=np.int64)
    if len(per_sample) and per_sample.max() > seq_length + extra:
        j = int(js[np.argmax(per_sample)])
        raise ValueError("sample %d holds %d tokens, more than seq_length + extra = %d (indices built for another "
                         "seq_length?)" % (j, int(per_sample.max()), seq_length + extra))
    keep = stop > start
    size = index.dtype.itemsize
    offsets = index.sequence_pointers[doc].astype(np.int64) + start * size
    lengths = (stop - start) * size
    samples = np.repeat(np.arange(len(js), dtype=np.int64), counts)
    offsets, lengths, samples = offsets[keep], lengths[keep], samples[keep]
    if bin_size is None:
        bin_path = os.path.splitext(index.path)[0] + ".bin"
        bin_size = os.path.getsize(bin_path) if os.path.isfile(bin_path) else None
    _, offsets, lengths = check_ranges(np.zeros(len(offsets), dtype=np.int32), offsets, lengths, [bin_size])
    return offsets, lengths, samples


def _load_npy(a: Any) -> Array:
    """An array, or a ``.npy`` file (as Megatron's index cache saves them) mapped read-only."""
    if isinstance(a, (str, bytes, os.PathLike)):
        return np.load(os.fsdecode(os.fspath(a)), mmap_mode="r", allow_pickle=False)
    return np.asarray(a)


# ---- OLMo ------------------------------------------------------------------


def olmo_ranges(paths_sizes: Sequence[Tuple[Any, int]], chunk_size: int, global_indices: Any,
                dtype: Any = np.uint32, partial_last_chunk: bool = False) -> Tuple[Array, Array, Array]:
    """``(file_index, offsets, lengths)`` of OLMo ``MemMapDataset`` instances
    in ``global_indices`` order.

    ``paths_sizes`` lists the dataset's token files as ``(path, size in
    bytes)``, in ``MemMapDataset``'s order (``file_index`` indexes it);
    ``global_indices`` is an array, or the path of OLMo's
    ``global_indices.npy`` (a raw uint32 memmap, no ``.npy`` header, as
    olmo/data/iterable_dataset.py writes it). A data-parallel rank passes
    its share of the indices.

    Mirrors olmo/data/memmap_dataset.py: a file of ``size`` bytes holds
    ``size // (chunk_size * itemsize)`` instances (``ceil`` with
    ``partial_last_chunk``, as newer OLMo versions count, the last one then
    short); global index ``g`` is instance ``g - start`` of the file whose
    instances start at ``start``, and its bytes are ``[local * chunk_size *
    itemsize, + chunk_size * itemsize)``. Raises ValueError.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1 (got %d)" % chunk_size)
    chunk = chunk_size * np.dtype(dtype).itemsize
    sizes = np.array([int(s) for _, s in paths_sizes], dtype=np.int64)
    if len(sizes) and sizes.min() < 0:
        raise ValueError("paths_sizes: negative file size")
    counts = -(-sizes // chunk) if partial_last_chunk else sizes // chunk
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if isinstance(global_indices, (str, bytes, os.PathLike)):
        g = _int_array(np.memmap(os.fsdecode(os.fspath(global_indices)), dtype=np.uint32, mode="r"), "global_indices")
    else:
        g = _int_array(global_indices, "global_indices")
    if len(g) and (g.min() < 0 or g.max() >= starts[-1]):
        bad = g[(g < 0) | (g >= starts[-1])][0]
        raise ValueError("global index %d outside the %d instances of the files" % (bad, starts[-1]))
    # side="right": a global index belongs to the last file starting at or
    # before it, which skips files of no instance as OLMo's scan does.
    fi = np.searchsorted(starts, g, side="right") - 1
    offsets = (g - starts[fi]) * chunk
    lengths = np.minimum(chunk, sizes[fi] - offsets)
    return check_ranges(fi, offsets, lengths, [int(s) for s in sizes])
