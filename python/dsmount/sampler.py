"""A PyTorch Sampler wrapper that declares each epoch's sample order.

:class:`OrderedSampler` wraps any sampler (``RandomSampler``,
``DistributedSampler``, a plain list of indices...) and, at the start of
every epoch, tells dsmount which files the epoch will read and in which
order, plus the next epoch's order, before it yields the first index. dsmount
then prefetches ahead of the readers and keeps in its cache what is needed
soonest.

When something after the sampler gives each process only part of the epoch
(Hugging Face Accelerate's ``accelerator.prepare(loader)``), ``share`` tells
the wrapper which part this process reads, so that it declares only that:
see :func:`dsmount.follow_accelerate` and docs/frameworks.md.

torch is not imported by this module; it works with anything iterable.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

from .control import AnyPath, Client, DsmountError, JSONObject, PathTable, Relativizer, StrPath, find_mount_root

log = logging.getLogger(__name__)


class IndexSampler(Protocol):
    """What :class:`OrderedSampler` wraps: an iterable of dataset indices
    with a length (any PyTorch sampler, a list of ints...)."""

    def __iter__(self) -> Iterator[int]: ...

    def __len__(self) -> int: ...


#: Maps a dataset index to its file: a sequence (``paths[i]``) or a
#: callable (``paths(i)``).
Paths = Union[Sequence[AnyPath], Callable[[int], AnyPath]]

#: Maps an epoch's indices (what the wrapped sampler yields) to the ones this
#: process reads, in the order it reads them.
Share = Callable[[List[int]], Sequence[int]]


def default_job_name(sampler: object = None) -> str:
    """Return a job name unique to this process (and rank).

    ``"<hostname>-<pid>"``, plus ``"-rank<r>"`` when ``sampler`` has a
    ``rank`` attribute (``DistributedSampler``) or torch.distributed is
    initialised in this process.
    """
    name = "%s-%d" % (socket.gethostname(), os.getpid())
    rank = getattr(sampler, "rank", None)
    if rank is None:
        rank = _distributed_rank()
    if rank is not None:
        name += "-rank%d" % int(rank)
    return name


def _distributed_rank() -> Optional[int]:
    """The torch.distributed rank, or None when not initialised.

    Looks only if torch was already imported: a process that never imported
    torch can't have initialised it.
    """
    dist = _initialised_distributed()
    return int(dist.get_rank()) if dist is not None else None


def _distributed_world_size() -> Optional[int]:
    """The torch.distributed world size, or None when not initialised."""
    dist = _initialised_distributed()
    return int(dist.get_world_size()) if dist is not None else None


def _initialised_distributed() -> Any:
    """torch.distributed if torch is imported and it is initialised, else None."""
    if "torch" not in sys.modules:
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


class OrderedSampler:
    """Wrap ``sampler`` so every epoch's order is declared to dsmount.

    Args:
        sampler: the sampler to wrap; any iterable of dataset indices with
            ``__len__`` (``RandomSampler``, ``DistributedSampler``, ...).
        paths: maps a dataset index to its file: a sequence (``paths[i]``)
            or a callable (``paths(i)``). Paths are relative to the mount
            root, or absolute paths inside the mount.
        mountpoint: the mount's root. If None it is found from the first
            absolute path (see :func:`dsmount.find_mount_root`).
        job: the job name, unique on the mount. Default:
            :func:`default_job_name` (``host-pid``, plus ``-rankN`` for a
            distributed sampler or an initialised torch.distributed).
        strict: if True a failed declaration raises :class:`DsmountError`;
            by default it is logged as a warning and the epoch goes on
            undeclared (reads still work, just without prefetch).
        declare_next: also declare the next epoch's order (default True).
        client: a :class:`dsmount.control.Client` to use (tests pass one with
            a fake control entry); default ``Client(mountpoint)``.
        share: when each process reads only part of what ``sampler``
            yields because something after this wrapper shards the epoch
            (Accelerate's ``BatchSamplerShard``), a function mapping the
            epoch's indices to the ones this process reads, in order: the
            wrapper declares ``share(indices)`` (and ``share(next)``) and
            still yields every index. :func:`dsmount.follow_accelerate` sets
            it from a prepared DataLoader. Default None: the whole epoch.

    Each ``iter()`` is one epoch. Before yielding anything it materialises
    the epoch's indices, declares them and the next epoch's indices, then
    yields them. The next epoch's order is known exactly:

    * if ``sampler`` has ``set_epoch`` (``DistributedSampler``), by calling
      ``sampler.set_epoch(e + 1)``, listing it, and restoring
      ``set_epoch(e)``; call :meth:`set_epoch` every epoch as usual;
    * otherwise by a one-epoch lookahead: epoch e+1's indices are drawn from
      ``sampler`` during epoch e, kept, and yielded at epoch e+1. The
      sequence of epochs is what the sampler gives, but each is drawn one
      epoch early, so a sampler using the global RNG sees the RNG as it was
      an epoch earlier.

    The declared epoch number is the sampler's ``epoch`` when it has
    ``set_epoch``; otherwise it counts ``iter()`` calls from 0, and
    :meth:`set_epoch` sets it.

    If ``mountpoint`` is None and can't be found from the paths (they are
    not in a dsmount mount), the wrapper only passes indices through, with a
    warning (``strict=True`` raises instead): the same script then runs on
    a plain directory.

    Under torch.distributed with several processes, if the wrapped sampler
    is not a ``DistributedSampler`` (it has no ``num_replicas``) and no
    ``share`` is given, the first epoch logs a warning: each process then
    declares the whole epoch, which is right only if each reads all of it. Frameworks that
    shard after the sampler (PyTorch Lightning's automatic
    ``DistributedSamplerWrapper``, Accelerate) need
    :class:`dsmount.DistributedOrderedSampler` or :func:`follow_accelerate`
    instead: see docs/frameworks.md.

    ``generator`` is the wrapped sampler's (``RandomSampler(generator=...)``),
    read and set through the wrapper, so that Accelerate, which looks for a
    ``generator`` on the DataLoader's sampler, keeps it the same on every
    process.
    """

    def __init__(self, sampler: IndexSampler, paths: Paths, mountpoint: Optional[StrPath] = None,
                 job: Optional[str] = None, *, strict: bool = False, declare_next: bool = True,
                 client: Optional[Client] = None, share: Optional[Share] = None) -> None:
        self.sampler = sampler
        self.paths = paths
        self.strict = strict
        self.declare_next = declare_next
        self.share = share
        self.job: str = job or default_job_name(sampler)
        if client is None:
            if mountpoint is None:
                mountpoint = self._guess_mountpoint()
            if mountpoint is not None:
                client = Client(mountpoint)
        self.client: Optional[Client] = client  # None: nothing to declare to
        self.mountpoint: Optional[str] = client.mountpoint if client is not None else None
        self._relative: Optional[Relativizer] = Relativizer(self.mountpoint) if self.mountpoint is not None else None
        #: The daemon's answer to the last declaration, or None.
        self.last_result: Optional[JSONObject] = None
        self._epoch = 0          # the epoch the next iter() is, for samplers without set_epoch
        self._epoch_set = False  # set_epoch was called since the last iter()
        self._iters = 0
        self._warned_set_epoch = False
        self._lookahead: Optional[List[int]] = None  # indices drawn one epoch ahead, for samplers without set_epoch
        self._relpaths: Optional[List[str]] = None   # relative paths, when paths is a sequence
        self._table: Union[PathTable, None, bool] = None  # PathTable of _relpaths (False: can't be one)

    @property
    def generator(self) -> Any:
        """The wrapped sampler's ``generator``; AttributeError if it has none."""
        try:
            return getattr(self.sampler, "generator")
        except AttributeError:
            raise AttributeError("the wrapped %s has no generator" % type(self.sampler).__name__) from None

    @generator.setter
    def generator(self, value: Any) -> None:
        if not hasattr(self.sampler, "generator"):
            raise AttributeError("the wrapped %s has no generator" % type(self.sampler).__name__)
        setattr(self.sampler, "generator", value)

    def _guess_mountpoint(self) -> Optional[str]:
        """The mount root of the first path; None (after a warning) if none."""
        try:
            if callable(self.paths) or len(self.paths) == 0:
                raise DsmountError("pass mountpoint= (it can be found only from a non-empty list of paths)")
            first = os.fsdecode(os.fspath(self.paths[0]))
            if not os.path.isabs(first):
                raise DsmountError("pass mountpoint= (the paths are relative)")
            return find_mount_root(first)
        except (DsmountError, OSError) as e:
            if self.strict:
                raise DsmountError("OrderedSampler: %s" % e) from e
            log.warning("dsmount: OrderedSampler: %s; orders will not be declared", e)
            return None

    def __len__(self) -> int:
        return len(self.sampler)

    @property
    def epoch(self) -> int:
        """The epoch number the next ``iter()`` declares."""
        if hasattr(self.sampler, "set_epoch"):
            return int(getattr(self.sampler, "epoch", self._epoch))
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch the next ``iter()`` is; passed on to the sampler."""
        self._epoch = int(epoch)
        self._epoch_set = True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        epoch = self.epoch
        if self._iters == 0 and self.client is not None:
            self._check_sharding()
        if hasattr(self.sampler, "set_epoch"):
            if self._iters and not self._epoch_set and self.declare_next and not self._warned_set_epoch:
                self._warned_set_epoch = True
                log.warning("dsmount: job %s: set_epoch() was not called before this epoch, so the next-epoch "
                            "order declared last epoch was wrong; call sampler.set_epoch(epoch) every epoch", self.job)
            indices, nxt = self._draw_with_set_epoch(epoch)
        else:
            indices, nxt = self._draw_with_lookahead()
        self._iters += 1
        self._epoch_set = False
        self._epoch = epoch + 1
        if self.client is not None and indices:
            self._declare(epoch, indices, nxt)
        return iter(indices)

    def _check_sharding(self) -> None:
        """Warn if several torch.distributed processes each declare a whole
        epoch that something after this wrapper may shard."""
        if self.share is not None or hasattr(self.sampler, "num_replicas"):
            return
        world = _distributed_world_size()
        if world is None or world < 2:
            return
        log.warning("dsmount: job %s: torch.distributed runs %d processes but the wrapped %s is not a "
                    "DistributedSampler, so this process declares the whole epoch. If something shards it after "
                    "this sampler (PyTorch Lightning's use_distributed_sampler, Accelerate's prepare), each process "
                    "reads only part of what it declares: use dsmount.DistributedOrderedSampler, or "
                    "dsmount.follow_accelerate(loader) (docs/frameworks.md)", self.job, world,
                    type(self.sampler).__name__)

    def _draw_with_set_epoch(self, epoch: int) -> Tuple[List[int], Optional[List[int]]]:
        """This epoch's indices and the next's, by moving the sampler's epoch."""
        indices = list(self.sampler)
        if not self.declare_next:
            return indices, None
        set_epoch = getattr(self.sampler, "set_epoch")
        set_epoch(epoch + 1)
        try:
            nxt = list(self.sampler)
        finally:
            set_epoch(epoch)
        return indices, nxt

    def _draw_with_lookahead(self) -> Tuple[List[int], Optional[List[int]]]:
        """This epoch's indices and the next's, drawing one epoch ahead.

        The next epoch's indices are kept and yielded by the next iter(), so
        what is declared as next is exactly what comes next.
        """
        if self._lookahead is not None:
            indices, self._lookahead = self._lookahead, None
        else:
            indices = list(self.sampler)
        if not self.declare_next:
            return indices, None
        self._lookahead = list(self.sampler)
        return indices, self._lookahead

    def _declare(self, epoch: int, indices: List[int], nxt: Optional[List[int]]) -> None:
        """Declare ``indices`` (this process's share of them) as ``epoch``'s
        order and ``nxt``'s as the next's."""
        self.last_result = None
        assert self.client is not None
        try:
            if self.share is not None:
                indices = list(self.share(indices))
                nxt = list(self.share(nxt)) if nxt else nxt
                if not indices:
                    return  # this process reads nothing this epoch
            table = self._path_table()
            if table is not None:
                res = self.client.declare_indices(self.job, epoch, table, indices, nxt)
            else:
                cur = self._to_paths(indices)
                nxt_paths = self._to_paths(nxt) if nxt else None
                res = self.client.declare_order(self.job, epoch, cur, nxt_paths)
        except Exception as e:  # a failed declaration must not stop training
            if self.strict:
                if isinstance(e, DsmountError):
                    raise
                raise DsmountError("declaring epoch %d of job %s: %s" % (epoch, self.job, e)) from e
            log.warning("dsmount: could not declare epoch %d of job %s on %s (reading on without prefetch): %s",
                        epoch, self.job, self.mountpoint, e)
            return
        self.last_result = res
        if res.get("skipped"):
            log.warning("dsmount: job %s epoch %d: %d paths skipped, e.g. %s", self.job, epoch,
                        res["skipped"], "; ".join(res.get("skipped_examples") or []))

    def _path_table(self) -> Optional[PathTable]:
        """The dataset's paths as a PathTable (made once), or None when
        paths is a callable or can't be one: orders are then declared as
        paths."""
        if callable(self.paths) or not hasattr(self.client, "declare_indices"):
            return None
        if self._table is None:
            try:
                self._table = PathTable(self._relative_paths())
            except ValueError:
                self._table = False
        return self._table if isinstance(self._table, PathTable) else None

    def _relative_paths(self) -> List[str]:
        """``paths`` (a sequence) relative to the mount root, made once."""
        assert self._relative is not None and not callable(self.paths)
        if self._relpaths is None:
            self._relpaths = self._relative.many(self.paths)
        return self._relpaths

    def _to_paths(self, indices: Sequence[int]) -> List[str]:
        """Map dataset indices to paths relative to the mount root."""
        assert self._relative is not None
        if callable(self.paths):
            return [self._relative(self.paths(i)) for i in indices]
        rel = self._relative_paths()
        return [rel[i] for i in indices]

    def end(self) -> bool:
        """Tell dsmount the job is done. Returns True if the daemon knew it.

        Failures are logged (or raised if ``strict``), like declarations.
        """
        if self.client is None:
            return False
        try:
            return self.client.end_job(self.job)
        except Exception as e:
            if self.strict:
                raise
            log.warning("dsmount: could not end job %s on %s: %s", self.job, self.mountpoint, e)
            return False

    def __enter__(self) -> OrderedSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
