"""Stage DataLoader batches onto the GPU ahead of the training step.

:class:`StagingLoader` wraps a ``DataLoader`` and yields its batches on
``device``. With CUDA, batch i+1 is copied host-to-device from pinned memory
on a side stream while the step on batch i runs on the current stream:

1. each batch's tensors are pinned (unless the DataLoader already pinned
   them, ``pin_memory=True``) and copied with ``non_blocking=True`` inside
   ``torch.cuda.stream(side)``; an event is recorded on the side stream
   after the copies;
2. before a batch is handed out, the current stream waits for that event
   (only that batch's copies, not the next batch's), and every device
   tensor is marked with ``record_stream(current)`` so the caching
   allocator does not reuse its memory while the step that uses it may
   still be running on the current stream;
3. the pinned host tensors may be dropped as soon as the copies are
   queued: PyTorch's pinned-memory allocator (which ``pin_memory()`` and the
   DataLoader's pinning thread use) records the copy on the side stream and
   does not recycle the block until the copy has finished.

Without CUDA (or for a CPU device) the batches pass through as plain
tensors (moved with ``.to(device)`` if a device is given).

Example::

    loader = DataLoader(ds, batch_size=256, sampler=sampler, num_workers=8,
                        pin_memory=True)
    for images, labels in StagingLoader(loader, "cuda"):
        loss = model(images).loss(labels)   # already on the GPU
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional, Sized, Tuple, Union, cast

import torch

#: A batch: tensors, or tuples / lists / dicts of them, or anything else.
Batch = Any


class StagingLoader:
    """Iterate ``loader``'s batches moved to ``device``, one batch ahead.

    Args:
        loader: any iterable of batches (tensors, or tuples / lists / dicts
            of them; other values pass through unchanged).
        device: where to put the tensors; default ``"cuda"`` if CUDA is
            available, else the batches are yielded as they come.
    """

    def __init__(self, loader: Iterable[Batch], device: Union[str, torch.device, None] = None) -> None:
        self.loader = loader
        if device is None:
            device = "cuda" if torch.cuda.is_available() else None
        self.device: Optional[torch.device] = torch.device(device) if device is not None else None

    def __len__(self) -> int:
        return len(cast(Sized, self.loader))  # TypeError if the loader has no len()

    def __iter__(self) -> Iterator[Batch]:
        if self.device is not None and self.device.type == "cuda":
            return self._iter_cuda()
        return self._iter_plain()

    def _iter_plain(self) -> Iterator[Batch]:
        device = self.device
        for batch in self.loader:
            if device is not None:
                batch = _map_tensors(batch, lambda t: t.to(device))
            yield batch

    def _iter_cuda(self) -> Iterator[Batch]:
        side = torch.cuda.Stream(device=self.device)
        pending: Optional[Tuple[Batch, torch.cuda.Event]] = None
        for host in self.loader:
            staged = self._stage(host, side)
            if pending is not None:
                yield self._hand_over(pending)
            pending = staged
        if pending is not None:
            yield self._hand_over(pending)

    def _stage(self, host: Batch, side: torch.cuda.Stream) -> Tuple[Batch, torch.cuda.Event]:
        """Start copying ``host`` to the device on stream ``side``.

        Returns (device batch, event recorded after its copies).
        """
        host = _map_tensors(host, _pinned)
        with torch.cuda.stream(side):
            dev = _map_tensors(host, lambda t: t.to(self.device, non_blocking=True))
            done = torch.cuda.Event()
            done.record(side)
        return dev, done

    def _hand_over(self, staged: Tuple[Batch, torch.cuda.Event]) -> Batch:
        """Make a staged batch safe to use on the current stream."""
        dev, done = staged
        current = torch.cuda.current_stream(self.device)
        current.wait_event(done)
        _map_tensors(dev, lambda t: t.record_stream(current) or t)
        return dev


def _pinned(t: torch.Tensor) -> torch.Tensor:
    """``t`` in pinned host memory (tensors already on a device, and empty
    ones, whose copy moves no bytes, stay put)."""
    if t.device.type != "cpu" or t.numel() == 0 or t.is_pinned():
        return t
    return t.pin_memory()


def _map_tensors(obj: Batch, fn: Callable[[torch.Tensor], Any]) -> Batch:
    """Apply ``fn`` to every tensor in a nest of tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_map_tensors(o, fn) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        out = {k: _map_tensors(v, fn) for k, v in obj.items()}
        try:
            return out if type(obj) is dict else type(obj)(out)
        except TypeError:  # e.g. defaultdict: its first argument is a factory
            return out
    return obj
