"""A ``DistributedSampler`` that declares its rank's share of every epoch.

:class:`DistributedOrderedSampler` is a ``torch.utils.data.DistributedSampler``
(same arguments, same indices) that, like :class:`dsmount.OrderedSampler`
wrapped around one, declares to dsmount the order in which this rank will
read its share of each epoch, and the next epoch's, before it yields the
first index.

Being a ``DistributedSampler`` is the point: PyTorch Lightning
(``Trainer(use_distributed_sampler=True)``, the default) leaves a
DataLoader's sampler alone only when it is one; any other sampler,
``OrderedSampler`` included, it wraps in its ``DistributedSamplerWrapper``,
which shards the epoch after the wrapped sampler has declared all of it.
See docs/frameworks.md.

With ``locality=True`` (and ``batch_size``), each step's global batch is
still exactly ``DistributedSampler``'s, but its samples go to ranks whose
node caches them (:mod:`dsmount.locality`, docs/multinode.md).

This module imports torch (``pip install dsmount[torch]``).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any, Iterator, List, Optional, Sized, cast

from torch.utils.data import DistributedSampler

from .control import Client, DsmountError, JSONObject, StrPath
from .sampler import OrderedSampler, Paths, _initialised_distributed, default_job_name

log = logging.getLogger(__name__)


class DistributedOrderedSampler(DistributedSampler):
    """A ``DistributedSampler`` declaring this rank's order to dsmount.

    Args:
        dataset, num_replicas, rank, shuffle, seed, drop_last: as for
            ``torch.utils.data.DistributedSampler`` (``num_replicas`` and
            ``rank`` default to torch.distributed's world size and rank).
        paths, mountpoint, job, strict, declare_next, client: as for
            :class:`dsmount.OrderedSampler`. The job name defaults to
            ``host-pid-rankR``.
        locality: split each global batch among the ranks by what their
            nodes cache (needs ``batch_size``, torch.distributed
            initialised, and ``paths`` a sequence). The global batches,
            every rank's batch size and the epoch's samples stay exactly
            ``DistributedSampler``'s; which rank reads which sample of a
            batch changes. Every rank must iterate each epoch, as the
            ranks gather their nodes' bitmaps then (a collective call).
        batch_size: the DataLoader's batch size on every rank (locality).
        node: this rank's node, as the ranks tell nodes apart (locality);
            default: the host name and the mount's root, so that ranks
            reading one mount share one node's cache.

    Without locality, each ``iter()`` yields exactly what
    ``DistributedSampler`` yields for this rank and epoch, after declaring it as the epoch's order and the
    rank's share of epoch + 1 as the next (found by moving the epoch
    forward and back, as :class:`OrderedSampler` does for a
    ``DistributedSampler``). Call :meth:`set_epoch` every epoch, as
    ``DistributedSampler`` needs (Lightning does it for you).
    """

    def __init__(self, dataset: Sized, paths: Paths, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0, drop_last: bool = False, *,
                 mountpoint: Optional[StrPath] = None, job: Optional[str] = None, strict: bool = False,
                 declare_next: bool = True, client: Optional[Client] = None, locality: bool = False,
                 batch_size: Optional[int] = None, node: Optional[str] = None) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        if locality and (batch_size is None or int(batch_size) < 1):
            raise ValueError("DistributedOrderedSampler: locality=True needs batch_size (the DataLoader's, >= 1)")
        self.locality = bool(locality)
        self.batch_size = int(batch_size) if batch_size is not None else None
        if locality:
            self._check_world()
        self.node = node
        #: The split's plan gathered for this epoch (None: split as
        #: DistributedSampler does).
        self._membership: Optional[Any] = None  # a locality.Plan
        self.ordered = OrderedSampler(_Share(self), paths, mountpoint, job or default_job_name(self),
                                      strict=strict, declare_next=declare_next, client=client)

    def __iter__(self) -> Iterator[int]:
        self._membership = self._gather() if self.locality else None
        return iter(self.ordered)

    def _gather(self) -> Any:
        """The split's plan from every rank's node and every node's bitmap
        of cached files (a locality.Plan), or None when there is no
        membership to gather (torch.distributed not initialised).

        Two gathers over torch.distributed's whole group, with nothing
        that can raise before them: the ranks' nodes and terms, then the
        bitmaps, which only each node's first rank asks its daemon for.
        A disagreement is refused after the first, on every rank alike."""
        from . import locality as loc

        dist = _initialised_distributed()
        if dist is None:
            return None
        world = int(dist.get_world_size())
        table = self.ordered._path_table()
        # What every rank must agree on to compute the same split.
        terms = (len(self.dataset), self.seed, self.shuffle, self.drop_last, self.batch_size,
                 self.epoch, self.num_replicas, table.name if table is not None else None)
        mine = (self._node_key(), int(dist.get_rank()), self.rank, terms)
        first: List[Any] = [None] * world
        dist.all_gather_object(first, mine)
        _check_agreement(first)
        rank_nodes, keys = loc.node_index([g[0] for g in first])
        asks = rank_nodes.index(rank_nodes[self.rank]) == self.rank  # this node's first rank
        bitmap = loc.deflate(self._bitmap()) if asks else None
        second: List[Any] = [None] * world
        dist.all_gather_object(second, (asks, bitmap))
        bitmaps: List[Optional[bytes]] = [None] * len(keys)
        for (asked, bm), n in zip(second, rank_nodes):
            if asked:
                bitmaps[n] = bm  # None where its daemon did not answer: that node caches nothing
        # One plan for this epoch and the next one declared with it.
        return loc.Plan(len(self.dataset), rank_nodes, loc.Deflated(bitmaps))

    def _check_world(self) -> None:
        """Refuse, at construction, a sampler whose world is not
        torch.distributed's (the epoch's gather refuses it again, on every
        rank, for one built before the group)."""
        dist = _initialised_distributed()
        if dist is None:
            return
        world, rank = int(dist.get_world_size()), int(dist.get_rank())
        if world != self.num_replicas or rank != self.rank:
            raise ValueError("DistributedOrderedSampler: locality=True needs num_replicas and rank to be "
                             "torch.distributed's (world size %d, rank %d), got %d and %d"
                             % (world, rank, self.num_replicas, self.rank))

    def _node_key(self) -> str:
        if self.node is not None:
            return str(self.node)
        root = self.ordered.mountpoint
        return "%s:%s" % (socket.gethostname(), os.path.realpath(root) if root else "")

    def _bitmap(self) -> Optional[bytes]:
        """This node's cached files over the dataset, or None (unknown)."""
        client, table = self.ordered.client, self.ordered._path_table()
        if client is None or table is None or len(table) != len(self.dataset):
            return None
        try:
            return client.cached(table).bitmap
        except Exception as e:  # no bitmap: the split only loses hits
            log.warning("dsmount: rank %d: could not ask %s what it caches (splitting as if nothing): %s",
                        self.rank, client.mountpoint, e)
            return None

    def _indices(self) -> List[int]:
        """This rank's indices of the epoch set last."""
        if self._membership is None:
            return list(DistributedSampler.__iter__(self))
        from . import locality as loc

        order, num = loc.distributed_order(len(self.dataset), self.num_replicas, self.seed,
                                           self.epoch, self.shuffle, self.drop_last)
        assert self.batch_size is not None
        return cast(List[int], self._membership.split(order, num, self.batch_size, self.rank).tolist())

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch the next ``iter()`` shuffles and declares."""
        self.ordered.set_epoch(epoch)  # sets ours through _Share.set_epoch

    @property
    def job(self) -> str:
        """The job name this rank declares as."""
        return self.ordered.job

    @property
    def mountpoint(self) -> Optional[str]:
        """The mount's root, or None when there is nothing to declare to."""
        return self.ordered.mountpoint

    @property
    def last_result(self) -> Optional[JSONObject]:
        """The daemon's answer to the last declaration, or None."""
        return self.ordered.last_result

    def end(self) -> bool:
        """Tell dsmount this rank's job is done (see :meth:`OrderedSampler.end`)."""
        return self.ordered.end()

    def __enter__(self) -> DistributedOrderedSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


def _check_agreement(first: List[Any]) -> None:
    """Raise, on every rank alike, if the ranks' samplers disagree with
    torch.distributed or each other on what the split depends on (each
    rank gets the same list: node, process group rank, sampler rank,
    terms). A rank with no path table (no mount to declare to) agrees with
    any table."""
    for r, (_, group_rank, rank, terms) in enumerate(first):
        if group_rank != rank or terms[6] != len(first):
            raise DsmountError("DistributedOrderedSampler: locality=True needs num_replicas and rank to be "
                               "torch.distributed's (world size %d): rank %d has num_replicas %d and rank %d"
                               % (len(first), group_rank, terms[6], rank))
    names = ("the dataset's length", "seed", "shuffle", "drop_last", "batch_size", "the epoch", "num_replicas",
             "the dataset's paths (table)")
    for i, name in enumerate(names):
        known = [(r, g[3][i]) for r, g in enumerate(first) if g[3][i] is not None or i < len(names) - 1]
        for r, v in known[1:]:
            if v != known[0][1]:
                raise DsmountError("DistributedOrderedSampler: the ranks disagree on %s (rank %d: %r, rank %d: %r); "
                                   "every rank must build its sampler alike and call set_epoch"
                                   % (name, known[0][0], known[0][1], r, v))


class _Share:
    """The plain ``DistributedSampler`` view of a
    :class:`DistributedOrderedSampler`: what its :class:`OrderedSampler`
    wraps, so that drawing and moving the epoch do not declare again."""

    def __init__(self, owner: DistributedOrderedSampler) -> None:
        self._owner = owner

    def __iter__(self) -> Iterator[int]:
        return iter(self._owner._indices())

    def __len__(self) -> int:
        return int(DistributedSampler.__len__(self._owner))

    def set_epoch(self, epoch: int) -> None:
        DistributedSampler.set_epoch(self._owner, epoch)

    @property
    def epoch(self) -> int:
        return int(self._owner.epoch)

    @property
    def rank(self) -> int:
        return int(self._owner.rank)

    @property
    def num_replicas(self) -> int:
        return int(self._owner.num_replicas)
