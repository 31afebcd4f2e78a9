"""Cache-aware sharding of a distributed epoch: the same global batches as
``DistributedSampler``, each sample read by a rank whose node caches it.

Under data parallelism a step trains on the global batch, the union of the
ranks' batches. Which rank reads which sample of it changes nothing but
per-rank statistics (BatchNorm without SyncBN). So each step's global
batch is kept exactly as ``DistributedSampler`` draws it for the seed and
epoch, and only its split among the ranks changes: a sample goes to a rank
on a node whose cache holds it (every rank computes the same split from
the nodes' bitmaps, gathered once an epoch).

The split of global batch ``k`` (positions ``[k*B*W, (k+1)*B*W)`` of the
padded global order, ``W`` ranks, ``B`` samples a rank; the last batch
smaller, the same size on every rank, as ``DistributedSampler`` and a
``DataLoader`` of batch size ``B`` give it):

1. A sample some node caches goes to one of those nodes: its home node
   (below) if that is one, else the first holder after it in node order.
   Each node takes at most ``B`` samples for each of its ranks, in the
   order of the global batch.
2. A sample no node took goes to its home node while it has room.
3. What is left fills the nodes' remaining room in node order.
4. A node's samples, in global order, are dealt to its ranks ``B`` at a
   time, in rank order.

Every choice depends only on the global order and the bitmaps, so ranks
agree with no further message. The home node of a sample is a fixed hash
of its index over the nodes: in the cold epoch every node reads (and so
caches) its home share, and in later ones a miss goes home, so the nodes'
caches converge to disjoint shares instead of all keeping the same files.
A node declares, as its next epoch, the split the same bitmaps give for
the next epoch: under the ``order`` policy a sample it read only because
its holder had no room is then not needed again soon, and the daemon
evicts it (or refuses it) first. See docs/multinode.md.

This module needs numpy; :func:`distributed_order` needs torch.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

#: A numpy array (numpy's types are not analysed here: see pyproject.toml).
Array = Any

#: Knuth's multiplicative hash constant (2^32 / the golden ratio).
_HASH = 2654435761


def distributed_order(n: int, world: int, seed: int, epoch: int, shuffle: bool = True,
                      drop_last: bool = False) -> Tuple[Array, int]:
    """The global order ``DistributedSampler`` draws for every rank.

    Returns ``(order, num_samples)``: rank ``r`` of ``world`` reads
    ``order[r::world]`` (``num_samples`` each), exactly as
    ``torch.utils.data.DistributedSampler(dataset_of_n, world, r, shuffle,
    seed, drop_last)`` after ``set_epoch(epoch)``.
    """
    import torch

    if n < 0 or world < 1:
        raise ValueError("want a dataset of 0 samples or more and at least 1 rank, got %d and %d" % (n, world))
    if drop_last and n % world != 0:
        num_samples = math.ceil((n - world) / world)
    else:
        num_samples = math.ceil(n / world)
    total = num_samples * world
    if n == 0:
        return np.empty(0, dtype=np.int32), 0
    # The epoch in one array: int32 (half the sampler's int64, the same
    # permutation), the permutation drawn into its head, the padding
    # copied after it.
    dtype = np.int32 if n < 2**31 else np.int64
    order = np.empty(max(total, n), dtype=dtype)
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        torch.randperm(n, generator=g, dtype=torch.int32 if dtype == np.int32 else torch.int64,
                       out=torch.from_numpy(order[:n]))
    else:
        order[:n] = np.arange(n, dtype=dtype)
    for lo in range(n, total, n):  # padded with the head repeated, as the sampler pads
        order[lo:lo + n] = order[:min(n, total - lo)]
    order = order[:total]
    return order, num_samples


def _node_dtype(nodes: int) -> Any:
    """The smallest signed integer type holding -1 .. nodes."""
    return np.int8 if nodes < 127 else np.int16 if nodes < 32767 else np.int32


def home_nodes(samples: Array, nodes: int) -> Array:
    """The home node of each sample index: a fixed hash over ``nodes``
    (computed in slices, so that a million-sample epoch needs no
    temporary of its size)."""
    out = np.empty(len(samples), dtype=_node_dtype(nodes))
    for lo in range(0, len(samples), 1 << 16):
        h = np.asarray(samples[lo:lo + (1 << 16)]).astype(np.uint32) * np.uint32(_HASH)  # wraps: mod 2^32
        # The hash's high bits pick the node (its low ones repeat with
        # the index's).
        out[lo:lo + (1 << 16)] = (h.astype(np.uint64) * np.uint64(nodes)) >> np.uint64(32)
    return out


def _all_homes(n: int, nodes: int) -> Array:
    """home_nodes of 0 .. n-1, with no array of n indices."""
    return home_nodes(range(n), nodes)


def holders(n: int, home: Array, bitmaps: Sequence[Optional[bytes]]) -> Array:
    """For each sample index below ``n``, the node that should serve it
    from its cache, or -1: its home node (``home[i]``) if that caches it,
    else the first node after home (in node order, wrapping) that does.
    ``bitmaps[m]`` is node ``m``'s bitmap over the dataset (bit ``i`` in
    byte ``i // 8``, mask ``1 << (i % 8)``), or None when unknown."""
    nodes = len(bitmaps)
    dt = _node_dtype(nodes)
    best = np.full(n, nodes, dtype=dt)
    pref = np.full(n, -1, dtype=dt)
    dist = np.empty(n, dtype=dt)
    better = np.empty(n, dtype=bool)
    for m, bm in enumerate(bitmaps):
        if bm is None:
            continue
        arr = np.frombuffer(bm, dtype=np.uint8)
        if arr.size * 8 < n:  # a shorter bitmap: what it leaves out is not cached
            arr = np.concatenate([arr, np.zeros((n + 7) // 8 - arr.size, dtype=np.uint8)])
        has = np.unpackbits(arr, count=n, bitorder="little").view(bool)
        np.remainder(np.subtract(dt(m), home, out=dist), dt(nodes), out=dist)  # m's distance after home
        np.less(dist, best, out=better)
        np.logical_and(better, has, out=better)
        np.copyto(best, dist, where=better)
        np.copyto(pref, dt(m), where=better)
    return pref


class Deflated(Sequence[Optional[bytes]]):
    """Bitmaps as sent (zlib-compressed, or None), inflated one at a time
    as :func:`holders` reads them: a node's share of a million files is
    160 KB a bitmap, and 64 of them at once would be 10 MB a rank."""

    def __init__(self, items: Sequence[Optional[bytes]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        x = self.items[i]
        return None if x is None else zlib.decompress(x)


def deflate(bitmap: Optional[bytes]) -> Optional[bytes]:
    """A bitmap as :class:`Deflated` takes it."""
    return None if bitmap is None else zlib.compress(bitmap, 1)


def _take(want: Array, room: Array) -> Array:
    """Which entries of ``want`` (a node, or -1 for none) get their node:
    each node takes the first ``room[node]`` that want it, in order."""
    ok = np.zeros(want.shape, dtype=bool)
    if want.size == 0:
        return ok
    o = np.argsort(want, kind="stable")
    w = want[o]
    within = np.arange(w.size) - np.searchsorted(w, w, side="left")
    valid = w >= 0
    acc = np.zeros(w.size, dtype=bool)
    acc[valid] = within[valid] < room[w[valid]]
    ok[o] = acc
    return ok


def split(order: Array, num_samples: int, batch: int, rank_nodes: Sequence[int],
          bitmaps: Sequence[Optional[bytes]], rank: int) -> Array:
    """Rank ``rank``'s samples for the epoch whose global order is
    ``order`` (see :func:`distributed_order`), in the order it reads them.

    ``rank_nodes[r]`` is the node of rank ``r`` (0 .. nodes-1),
    ``bitmaps[m]`` node ``m``'s cached files (or None). The result has
    ``num_samples`` entries; its ``[k*batch:(k+1)*batch]`` is the rank's
    share of global batch ``k``, and the union of the ranks' shares of a
    batch is exactly ``DistributedSampler``'s.
    """
    n = int(order.max()) + 1 if len(order) else 0
    return Plan(n, rank_nodes, bitmaps).split(order, num_samples, batch, rank)


class Plan:
    """What the split of every epoch with one membership shares: each
    sample's home node and the node to serve it from its cache (samples
    ``0 .. n-1``; the epochs' orders index them)."""

    def __init__(self, n: int, rank_nodes: Sequence[int], bitmaps: Sequence[Optional[bytes]]) -> None:
        nodes = len(bitmaps)
        self.node_of = np.asarray(rank_nodes, dtype=np.int64)
        if len(self.node_of) < 1:
            raise ValueError("want at least 1 rank")
        if self.node_of.min() < 0 or self.node_of.max() >= nodes:
            raise ValueError("a rank's node is outside 0..%d" % (nodes - 1))
        self.n = n
        self.per_node = np.bincount(self.node_of, minlength=nodes)
        self.home = _all_homes(n, nodes)
        self.pref = holders(n, self.home, bitmaps)

    def split(self, order: Array, num_samples: int, batch: int, rank: int) -> Array:
        """Rank ``rank``'s samples of the epoch of ``order`` (see :func:`split`)."""
        world = len(self.node_of)
        if batch < 1:
            raise ValueError("want a batch of at least 1")
        if len(order) != num_samples * world:
            raise ValueError("the order holds %d samples, not %d ranks of %d" % (len(order), world, num_samples))
        if len(order) and int(order.max()) >= self.n:
            raise ValueError("the order names sample %d of a plan for %d" % (int(order.max()), self.n))
        if len(order) == 0:
            return np.empty(0, dtype=np.int64)
        mine = int(self.node_of[rank])
        my_slot = int(np.count_nonzero(self.node_of[:rank] == mine))  # my place among my node's ranks
        out = np.empty(num_samples, dtype=np.int64)
        for k, lo, b, take in batches(order, batch, self.per_node, self.pref, self.home):
            ours = np.flatnonzero(take == mine)
            out[k * batch:k * batch + b] = order[lo + ours[my_slot * b:(my_slot + 1) * b]]
        return out


def batches(order: Array, batch: int, per_node: Array, pref: Array, home: Array) -> Iterator[Tuple[int, int, int, Array]]:
    """The node of every position of each global batch of ``order``:
    yields ``(k, lo, b, take)`` for global batch ``k`` at positions
    ``lo ..``, ``b`` samples a rank, ``take[i]`` the node that reads
    position ``lo + i``. ``per_node[m]`` is how many ranks node ``m`` has;
    ``pref`` and ``home`` are by sample index (:func:`holders`,
    :func:`home_nodes`)."""
    nodes = len(per_node)
    world = int(per_node.sum())
    step = batch * world
    for k, lo in enumerate(range(0, len(order), step)):
        hi = min(lo + step, len(order))
        b = (hi - lo) // world
        room = per_node * b
        take = np.full(hi - lo, -1, dtype=np.int64)
        samples = order[lo:hi]
        for want in (pref[samples].astype(np.int64), home[samples].astype(np.int64)):
            free = take < 0
            w = np.where(free, want, -1)
            ok = _take(w, room)
            take[ok] = w[ok]
            room = room - np.bincount(w[ok], minlength=nodes)
        rest = np.flatnonzero(take < 0)
        take[rest] = np.repeat(np.arange(nodes), room)
        yield k, lo, b, take


def node_index(keys: Sequence[str]) -> Tuple[List[int], List[str]]:
    """Number the distinct node keys of the ranks in order of first rank:
    returns each rank's node and the nodes' keys."""
    seen: dict = {}
    nodes: List[int] = []
    for k in keys:
        if k not in seen:
            seen[k] = len(seen)
        nodes.append(seen[k])
    return nodes, list(seen)
