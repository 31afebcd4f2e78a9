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
* :class:`DistributedOrderedSampler` (in :mod:`dsmount.distributed`) is a
  ``DistributedSampler`` that declares its rank's share: what PyTorch
  Lightning leaves in place; :func:`follow_accelerate` makes an
  OrderedSampler in an Accelerate-prepared DataLoader declare only this
  process's batches (docs/frameworks.md).
* :class:`StagingLoader` (in :mod:`dsmount.staging`) overlaps host-to-GPU
  copies with compute.

Only the standard library is needed; torch (``pip install dsmount[torch]``)
is imported where it is used: ``DistributedOrderedSampler`` and
``StagingLoader`` are imported on first use, and are not in ``__all__`` so
that ``from dsmount import *`` works without torch.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .control import (CONTROL_NAME, CachedFiles, Client, DsmountError, PathTable, declare_order, declare_ranges, end_job,
                      find_mount_root, relative_path, stats)
from .frameworks import follow_accelerate
from .loaders import pil_loader, read_bytes
from .sampler import OrderedSampler, default_job_name

if TYPE_CHECKING:
    from .distributed import DistributedOrderedSampler
    from .staging import StagingLoader

#: The package's version (the one in its metadata: pyproject.toml reads it here).
__version__ = "0.2.0"

#: The names that need torch, and the module of each.
_TORCH_NAMES = {"DistributedOrderedSampler": "distributed", "StagingLoader": "staging"}


def __getattr__(name: str) -> Any:
    # These need torch; import them only when asked for.
    module = _TORCH_NAMES.get(name)
    if module is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    try:
        mod = importlib.import_module("." + module, __name__)
    except ModuleNotFoundError as e:
        if e.name != "torch" and not (e.name or "").startswith("torch."):
            raise
        raise ModuleNotFoundError("dsmount.%s needs PyTorch, which is not installed: pip install 'dsmount[torch]' "
                                  "(or your distribution's package, e.g. Debian's python3-torch)" % name,
                                  name=e.name) from e
    return getattr(mod, name)


__all__ = [
    "CONTROL_NAME", "CachedFiles", "Client", "DsmountError", "OrderedSampler", "PathTable",
    "declare_order", "declare_ranges", "default_job_name", "end_job", "find_mount_root", "follow_accelerate",
    "pil_loader", "read_bytes", "relative_path", "stats",
]
