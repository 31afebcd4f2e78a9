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
from typing import Any, List, Optional, Sequence, Tuple

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

    if n < 1 or world < 1:
        raise ValueError("want a dataset of at least 1 sample and at least 1 rank, got %d and %d" % (n, world))
    if drop_last and n % world != 0:
        num_samples = math.ceil((n - world) / world)
    else:
        num_samples = math.ceil(n / world)
    total = num_samples * world
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        base = torch.randperm(n, generator=g).numpy().astype(np.int64)
    else:
        base = np.arange(n, dtype=np.int64)
    if total <= n:
        order = base[:total]
    else:
        order = np.resize(base, total)  # repeats base from its start, as the sampler pads
    return order, num_samples


def home_nodes(samples: Array, nodes: int) -> Array:
    """The home node of each sample index: a fixed hash over ``nodes``."""
    h = (samples.astype(np.uint64) * np.uint64(_HASH)) & np.uint64(0xFFFFFFFF)
    return (h % np.uint64(nodes)).astype(np.int64)


def holders(samples: Array, home: Array, bitmaps: Sequence[Optional[bytes]]) -> Array:
    """For each sample, the node that should serve it from its cache, or
    -1: its home node if that caches it, else the first node after home
    (in node order, wrapping) that does. ``bitmaps[m]`` is node ``m``'s
    bitmap over the dataset (bit ``i`` in byte ``i // 8``, mask
    ``1 << (i % 8)``), or None when unknown."""
    nodes = len(bitmaps)
    best = np.full(samples.shape, nodes, dtype=np.int64)
    pref = np.full(samples.shape, -1, dtype=np.int64)
    byte, bit = samples >> 3, (samples & 7).astype(np.uint8)
    for m, bm in enumerate(bitmaps):
        if bm is None:
            continue
        arr = np.frombuffer(bm, dtype=np.uint8)
        inside = byte < len(arr)
        has = np.zeros(samples.shape, dtype=bool)
        has[inside] = (arr[byte[inside]] >> bit[inside]) & 1 == 1
        dist = (m - home) % nodes
        better = has & (dist < best)
        best[better] = dist[better]
        pref[better] = m
    return pref


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
    world = len(rank_nodes)
    nodes = len(bitmaps)
    if world < 1 or batch < 1:
        raise ValueError("want at least 1 rank and a batch of at least 1")
    if len(order) != num_samples * world:
        raise ValueError("the order holds %d samples, not %d ranks of %d" % (len(order), world, num_samples))
    node_of = np.asarray(rank_nodes, dtype=np.int64)
    if node_of.min() < 0 or node_of.max() >= nodes:
        raise ValueError("a rank's node is outside 0..%d" % (nodes - 1))
    per_node = np.bincount(node_of, minlength=nodes)
    mine = int(node_of[rank])
    my_slot = int(np.count_nonzero(node_of[:rank] == mine))  # my place among my node's ranks
    home = home_nodes(order, nodes)
    pref = holders(order, home, bitmaps)
    out = np.empty(num_samples, dtype=np.int64)
    step = batch * world
    for k, lo in enumerate(range(0, len(order), step)):
        hi = min(lo + step, len(order))
        b = (hi - lo) // world
        room = per_node * b
        take = np.full(hi - lo, -1, dtype=np.int64)
        for want in (pref[lo:hi], home[lo:hi]):
            free = take < 0
            w = np.where(free, want, -1)
            ok = _take(w, room)
            take[ok] = w[ok]
            room = room - np.bincount(w[ok], minlength=nodes)
        rest = np.flatnonzero(take < 0)
        take[rest] = np.repeat(np.arange(nodes), room)
        ours = np.flatnonzero(take == mine)
        out[k * batch:k * batch + b] = order[lo + ours[my_slot * b:(my_slot + 1) * b]]
    return out


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
