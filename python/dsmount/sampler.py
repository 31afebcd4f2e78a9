"""A PyTorch Sampler wrapper that declares each epoch's sample order.

:class:`OrderedSampler` wraps any sampler (``RandomSampler``,
``DistributedSampler``, a plain list of indices...) and, at the start of
every epoch, tells dsmount which files the epoch will read and in which
order, plus the next epoch's order, before it yields the first index. dsmount
then prefetches ahead of the readers and keeps in its cache what is needed
soonest.

torch is not imported by this module; it works with anything iterable.
"""

import logging
import os
import socket
import sys

from .control import Client, DsmountError, PathTable, Relativizer, find_mount_root

log = logging.getLogger(__name__)


def default_job_name(sampler=None):
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


def _distributed_rank():
    """The torch.distributed rank, or None when not initialised.

    Looks only if torch was already imported: a process that never imported
    torch can't have initialised it.
    """
    if "torch" not in sys.modules:
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
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
    """

    def __init__(self, sampler, paths, mountpoint=None, job=None, *, strict=False,
                 declare_next=True, client=None):
        self.sampler = sampler
        self.paths = paths
        self.strict = strict
        self.declare_next = declare_next
        self.job = job or default_job_name(sampler)
        if client is None:
            if mountpoint is None:
                mountpoint = self._guess_mountpoint()
            if mountpoint is not None:
                client = Client(mountpoint)
        self.client = client  # None: nothing to declare to
        self.mountpoint = client.mountpoint if client is not None else None
        self._relative = Relativizer(self.mountpoint) if client is not None else None
        self.last_result = None  # the daemon's answer to the last declaration, or None
        self._epoch = 0          # the epoch the next iter() is, for samplers without set_epoch
        self._epoch_set = False  # set_epoch was called since the last iter()
        self._iters = 0
        self._warned_set_epoch = False
        self._lookahead = None   # indices drawn one epoch ahead, for samplers without set_epoch
        self._relpaths = None    # relative paths, when paths is a sequence
        self._table = None       # PathTable of _relpaths (False: can't be one)

    def _guess_mountpoint(self):
        """The mount root of the first path; None (after a warning) if none."""
        try:
            if callable(self.paths) or len(self.paths) == 0:
                raise DsmountError("pass mountpoint= (it can be found only from a non-empty list of paths)")
            first = os.fspath(self.paths[0])
            if isinstance(first, bytes):
                first = os.fsdecode(first)
            if not os.path.isabs(first):
                raise DsmountError("pass mountpoint= (the paths are relative)")
            return find_mount_root(first)
        except (DsmountError, OSError) as e:
            if self.strict:
                raise DsmountError("OrderedSampler: %s" % e) from e
            log.warning("dsmount: OrderedSampler: %s; orders will not be declared", e)
            return None

    def __len__(self):
        return len(self.sampler)

    @property
    def epoch(self):
        """The epoch number the next ``iter()`` declares."""
        if hasattr(self.sampler, "set_epoch"):
            return int(getattr(self.sampler, "epoch", self._epoch))
        return self._epoch

    def set_epoch(self, epoch):
        """Set the epoch the next ``iter()`` is; passed on to the sampler."""
        self._epoch = int(epoch)
        self._epoch_set = True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        epoch = self.epoch
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
        if indices and self.client is not None:
            self._declare(epoch, indices, nxt)
        return iter(indices)

    def _draw_with_set_epoch(self, epoch):
        """This epoch's indices and the next's, by moving the sampler's epoch."""
        indices = list(self.sampler)
        if not self.declare_next:
            return indices, None
        self.sampler.set_epoch(epoch + 1)
        try:
            nxt = list(self.sampler)
        finally:
            self.sampler.set_epoch(epoch)
        return indices, nxt

    def _draw_with_lookahead(self):
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

    def _declare(self, epoch, indices, nxt):
        self.last_result = None
        try:
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

    def _path_table(self):
        """The dataset's paths as a PathTable (made once), or None when
        paths is a callable or can't be one: orders are then declared as
        paths."""
        if callable(self.paths) or not hasattr(self.client, "declare_indices"):
            return None
        if self._table is None:
            if self._relpaths is None:
                self._relpaths = self._relative.many(self.paths)
            try:
                self._table = PathTable(self._relpaths)
            except ValueError:
                self._table = False
        return self._table or None

    def _to_paths(self, indices):
        """Map dataset indices to paths relative to the mount root."""
        if callable(self.paths):
            return [self._relative(self.paths(i)) for i in indices]
        if self._relpaths is None:
            self._relpaths = self._relative.many(self.paths)
        rel = self._relpaths
        return [rel[i] for i in indices]

    def end(self):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()
        return False
