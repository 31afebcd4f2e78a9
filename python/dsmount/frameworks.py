"""Declaring each process's share when a framework shards after the sampler.

Hugging Face Accelerate's ``accelerator.prepare(loader)`` keeps the
DataLoader's sampler and batch sampler and wraps the batch sampler in a
``BatchSamplerShard``: every process draws the whole epoch from the sampler,
batches it, and keeps every ``num_processes``-th batch from its
``process_index`` (or its slice of each batch with ``split_batches``, and
the first batches again at the end with ``even_batches``). An
:class:`~dsmount.OrderedSampler` in such a loader sees the whole epoch, so
by itself each process would declare all of it.

:func:`follow_accelerate` finds the OrderedSampler inside a prepared loader
and gives it a ``share``: a function that runs the loader's own batch
sampler chain (copies of it, the ``BatchSamplerShard`` included) over the
epoch's indices, so what is declared is what this process's DataLoader
will read, computed by Accelerate's own code whatever its version.

torch is not imported by this module.
"""

from __future__ import annotations

import copy
from typing import Any, List, Optional, Sequence

from .control import DsmountError
from .sampler import OrderedSampler


def follow_accelerate(loader: Any) -> OrderedSampler:
    """Make the :class:`~dsmount.OrderedSampler` in ``loader`` declare only
    what this process reads; return it.

    ``loader`` is what ``accelerator.prepare(DataLoader(ds,
    sampler=OrderedSampler(...), ...))`` returned (a ``DataLoaderShard``,
    or a ``DataLoaderDispatcher`` with ``dispatch_batches=True``, where
    process 0 reads every batch and the others none). A DataLoader that
    was not sharded (one process) declares what it reads: the whole epoch,
    less a last partial batch dropped by ``drop_last``.

    More generally it works with any chain of batch samplers, each keeping
    the one it wraps as ``.batch_sampler``, ending in one whose
    ``.sampler`` is the OrderedSampler (a ``torch.utils.data.BatchSampler``).

    Raises :class:`~dsmount.DsmountError` if ``loader`` holds no
    OrderedSampler that way (e.g. a
    :class:`~dsmount.DistributedOrderedSampler`, which shards by rank
    itself: Accelerate would then shard its share again).
    """
    chain = None
    for top in (getattr(loader, "batch_sampler", None), getattr(loader, "sampler", None)):
        chain = _batch_sampler_chain(top)
        if chain is not None:
            break
    if chain is None:
        inner = _innermost_sampler(loader)
        if type(inner).__name__ == "DistributedOrderedSampler":
            raise DsmountError("follow_accelerate: the DataLoader's sampler is a DistributedOrderedSampler, which "
                               "already gives this rank its share; Accelerate shards the batches again. Wrap the "
                               "plain sampler in dsmount.OrderedSampler instead (docs/frameworks.md)")
        raise DsmountError("follow_accelerate: no dsmount.OrderedSampler under the DataLoader's batch sampler "
                           "(found %s); build the DataLoader with sampler=dsmount.OrderedSampler(...) before "
                           "accelerator.prepare" % type(inner).__name__)
    ordered: OrderedSampler = chain[-1].sampler
    if _is_dispatcher(loader) and _process_index(loader) != 0:
        ordered.share = _nothing  # process 0 reads every batch and sends each process its part
    else:
        ordered.share = _ChainShare(chain)
    return ordered


def _batch_sampler_chain(top: Any) -> Optional[List[Any]]:
    """[top, top.batch_sampler, ...] down to a batch sampler whose
    ``.sampler`` is an OrderedSampler, or None if the chain ends elsewhere."""
    chain: List[Any] = []
    b = top
    while b is not None and len(chain) < 32:
        chain.append(b)
        if isinstance(getattr(b, "sampler", None), OrderedSampler) and getattr(b, "batch_sampler", None) is None:
            return chain
        b = getattr(b, "batch_sampler", None)
    return None


def _innermost_sampler(loader: Any) -> Any:
    """The sampler found by going down batch samplers, for error messages."""
    b: Any = getattr(loader, "batch_sampler", None) or getattr(loader, "sampler", None)
    for _ in range(32):
        if getattr(b, "batch_sampler", None) is not None:
            b = b.batch_sampler
        elif getattr(b, "sampler", None) is not None:
            return b.sampler
        else:
            break
    return b


def _is_dispatcher(loader: Any) -> bool:
    """Whether ``loader`` is Accelerate's DataLoaderDispatcher (or wraps one)."""
    loader = getattr(loader, "_loader", loader)  # MpDeviceLoaderWrapper
    return any(cls.__name__ == "DataLoaderDispatcher" for cls in type(loader).__mro__)


def _process_index(loader: Any) -> int:
    loader = getattr(loader, "_loader", loader)
    return int(loader.state.process_index)


def _nothing(indices: List[int]) -> List[int]:
    """The share of a process that reads nothing."""
    return []


class _ChainShare:
    """A share function: runs copies of a batch sampler chain over the
    epoch's indices and returns the indices of the batches it yields."""

    def __init__(self, chain: List[Any]) -> None:
        self.chain = chain

    def __call__(self, indices: List[int]) -> Sequence[int]:
        copies = [copy.copy(b) for b in self.chain]
        copies[-1].sampler = indices
        for outer, inner in zip(copies, copies[1:]):
            outer.batch_sampler = inner
        return [i for batch in copies[0] for i in batch]
