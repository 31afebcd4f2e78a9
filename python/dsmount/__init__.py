"""Python client of dsmount: declare a training job's sample order.

dsmount is a read-only FUSE filesystem that serves a dataset through a local
chunk cache. A job that tells it the order in which it will read files each
epoch gets those files prefetched ahead of its readers, and the cache keeps
what the declared orders need soonest.

* :class:`OrderedSampler` wraps a PyTorch sampler and declares every epoch's
  order (and the next one's) before yielding indices.
* :func:`declare_order`, :func:`end_job` and :func:`stats` speak to the
  daemon directly through the mount's hidden control entry.
* :func:`read_bytes` and :func:`pil_loader` read a sample without the
  ``isatty()`` ioctl that Python's default ``open()`` sends the daemon for
  every file: ``ImageFolder(root, loader=dsmount.pil_loader)``.
* :class:`StagingLoader` (in :mod:`dsmount.staging`) overlaps host-to-GPU
  copies with compute.

Only the standard library is needed; torch is imported where it is used.
"""

from .control import (CONTROL_NAME, Client, DsmountError, PathTable, declare_order, end_job,
                      find_mount_root, relative_path, stats)
from .loaders import pil_loader, read_bytes
from .sampler import OrderedSampler, default_job_name


def __getattr__(name):
    # StagingLoader needs torch; import it only when asked for.
    if name == "StagingLoader":
        from .staging import StagingLoader
        return StagingLoader
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = [
    "CONTROL_NAME", "Client", "DsmountError", "OrderedSampler", "PathTable", "StagingLoader",
    "declare_order", "default_job_name", "end_job", "find_mount_root",
    "pil_loader", "read_bytes", "relative_path", "stats",
]
