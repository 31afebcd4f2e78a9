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

This module imports torch (``pip install dsmount[torch]``).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sized

from torch.utils.data import DistributedSampler

from .control import Client, JSONObject, StrPath
from .sampler import OrderedSampler, Paths, default_job_name


class DistributedOrderedSampler(DistributedSampler):
    """A ``DistributedSampler`` declaring this rank's order to dsmount.

    Args:
        dataset, num_replicas, rank, shuffle, seed, drop_last: as for
            ``torch.utils.data.DistributedSampler`` (``num_replicas`` and
            ``rank`` default to torch.distributed's world size and rank).
        paths, mountpoint, job, strict, declare_next, client: as for
            :class:`dsmount.OrderedSampler`. The job name defaults to
            ``host-pid-rankR``.

    Each ``iter()`` yields exactly what ``DistributedSampler`` yields for
    this rank and epoch, after declaring it as the epoch's order and the
    rank's share of epoch + 1 as the next (found by moving the epoch
    forward and back, as :class:`OrderedSampler` does for a
    ``DistributedSampler``). Call :meth:`set_epoch` every epoch, as
    ``DistributedSampler`` needs (Lightning does it for you).
    """

    def __init__(self, dataset: Sized, paths: Paths, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0, drop_last: bool = False, *,
                 mountpoint: Optional[StrPath] = None, job: Optional[str] = None, strict: bool = False,
                 declare_next: bool = True, client: Optional[Client] = None) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        self.ordered = OrderedSampler(_Share(self), paths, mountpoint, job or default_job_name(self),
                                      strict=strict, declare_next=declare_next, client=client)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ordered)

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


class _Share:
    """The plain ``DistributedSampler`` view of a
    :class:`DistributedOrderedSampler`: what its :class:`OrderedSampler`
    wraps, so that drawing and moving the epoch do not declare again."""

    def __init__(self, owner: DistributedOrderedSampler) -> None:
        self._owner = owner

    def __iter__(self) -> Iterator[int]:
        indices: List[int] = list(DistributedSampler.__iter__(self._owner))
        return iter(indices)

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
