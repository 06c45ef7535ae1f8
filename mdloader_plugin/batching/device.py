"""Batches onto the trainer's device: pinned host memory and a copy that overlaps compute.

``MDLoader(..., pin_memory=True, device="cuda")``: the producer thread, right after it has built
a batch, copies it into page-locked host memory (``pin_memory``) and starts its host-to-device
copy on a *side* CUDA stream (``non_blocking=True``), recording an event; the trainer's thread,
when it takes the batch, makes its own current stream wait on that event (no host wait) and
marks every tensor as used by that stream (``record_stream``, so the caching allocator does not
reuse the memory while the trainer's kernels still read it). The copy of batch ``k+1`` therefore
runs while the trainer computes on batch ``k``, and the trainer never blocks on a copy that is
already done.

Defaults: nothing moves (``device=None``, ``pin_memory=False``): batches stay on the host, as
before. ``device="cuda"`` pins by default; ``pin_memory=True`` without an accelerator (CPU-only
torch) warns once and does not pin, as PyTorch's ``DataLoader`` does; ``device="cuda"`` without
CUDA is a :class:`~mdloader_plugin.core.errors.ConfigError`. A device that is not CUDA
(``"cpu"``, ...) is a plain synchronous ``.to(device)``.

Batches need ``.to(device, non_blocking=...)`` and, to be pinned, ``.pin_memory()`` (PyG
``Data``/``Batch``; plain tensors and dicts/lists/tuples of tensors also work).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError


class DeviceStage:
    """Pins and moves batches (producer side: :meth:`stage`; trainer side: :meth:`ready`)."""

    def __init__(self, device=None, pin_memory: bool | None = None, log=None):
        import torch

        self.torch, self.log = torch, log
        self.device = None if device is None else torch.device(device)
        cuda = self.device is not None and self.device.type == "cuda"
        if cuda and not torch.cuda.is_available():
            raise ConfigError(f"device={device!r} but this torch ({torch.__version__}) sees no "
                              "CUDA device; pass device=None (batches on the host) or 'cpu'")
        want_pin = cuda if pin_memory is None else bool(pin_memory)
        self.pin = want_pin and _has_accelerator(torch)
        if want_pin and not self.pin and log is not None:
            log.warning("pin_memory=True but no accelerator is found: batches are not pinned")
        self.stream = torch.cuda.Stream(device=self.device) if cuda else None
        self.active = self.pin or self.device is not None

    def stage(self, batch) -> Any:
        """Producer thread: pin, start the copy; returns what :meth:`ready` takes."""
        if not self.active:
            return batch
        if self.pin:
            batch = _apply(batch, lambda t: t.pin_memory())
        if self.stream is None:
            return batch if self.device is None else _to(batch, self.device, False)
        torch = self.torch
        with torch.cuda.stream(self.stream):
            batch = _to(batch, self.device, True)
            event = torch.cuda.Event()
            event.record(self.stream)
        return _Staged(batch, event)

    def ready(self, item) -> Any:
        """Trainer thread: the batch, usable on the current stream (no host wait)."""
        if not isinstance(item, _Staged):
            return item
        current = self.torch.cuda.current_stream(self.device)
        current.wait_event(item.event)
        _apply(item.batch, lambda t: t.record_stream(current) or t)
        return item.batch


class _Staged:
    __slots__ = ("batch", "event")

    def __init__(self, batch, event):
        self.batch, self.event = batch, event


def _has_accelerator(torch) -> bool:
    acc = getattr(torch, "accelerator", None)
    return bool(acc.is_available()) if acc is not None else torch.cuda.is_available()


def _to(batch, device, non_blocking: bool):
    if hasattr(batch, "to") and not isinstance(batch, (dict, list, tuple)):
        return batch.to(device, non_blocking=non_blocking)
    return _apply(batch, lambda t: t.to(device, non_blocking=non_blocking))


def _apply(obj, fn):
    """``fn`` on every tensor of a PyG object, a tensor, or a dict/list/tuple of them."""
    import torch

    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _apply(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_apply(v, fn) for v in obj)
    if hasattr(obj, "apply"):  # torch_geometric Data / Batch (in place, returns itself)
        return obj.apply(fn)
    return obj
