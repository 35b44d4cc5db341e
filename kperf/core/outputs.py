"""A call's own allocations served from memory it is given (plan key ``placed_outputs``).

An op allocates its output at every call (``torch.empty_like`` in a Triton wrapper, a
``torch.empty`` in TileLang's Python adapter), so torch's caching allocator hands every
call of a block the same place, drawn again only when the block's memory goes back to the
driver. Placed copies of the inputs (kperf/suites/case.py ``placed_in_arena``) then still share one
output place a block. Here a call's ``torch.empty`` and ``torch.empty_like`` requests on
the arena's device take consecutive views of a region of the copy's own arena slot;
allocations made inside compiled code (a torch op's own output, TVM-FFI's allocator) are
not seen and stay where the allocator puts them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kperf.core.prepare import span_bytes


def _request(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> tuple[tuple[int, ...], torch.dtype, torch.device, int] | None:
    """(shape, dtype, device, bytes) of a contiguous allocation, or None for anything
    else."""
    if (kwargs.get("out") is not None or kwargs.get("pin_memory")
            or kwargs.get("layout", torch.strided) is not torch.strided):
        return None
    if func is torch.empty_like:
        like = args[0]
        layout = kwargs.get("memory_format", torch.preserve_format)
        if layout not in (torch.preserve_format, torch.contiguous_format) or (
                layout is torch.preserve_format and not like.is_contiguous()):
            return None
        device = kwargs.get("device")
        shape, dtype = tuple(like.shape), kwargs.get("dtype") or like.dtype
        where = torch.device(device) if device is not None else like.device
    elif func is torch.empty:
        size = kwargs.get("size", args[0] if len(args) == 1 and isinstance(args[0], (tuple, list))
                          else args)
        device = kwargs.get("device")
        shape = tuple(int(s) for s in size)
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        where = torch.device(device) if device is not None else torch.device("cpu")
    else:
        return None
    return shape, dtype, where, math.prod(shape) * dtype.itemsize


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index or 0) == (b.index or 0)


class Recording(TorchFunctionMode):
    """Allocates as usual and notes the bytes each request on ``device`` takes."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device
        self.spans: list[int] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        request = _request(func, args, kwargs)
        if request is not None and _same_device(request[2], self.device):
            self.spans.append(span_bytes(request[3]))
        return func(*args, **kwargs)


class FromRegion(TorchFunctionMode):
    """Serves requests on the region's device from consecutive views of ``region`` (bytes);
    a request past its end is allocated as usual. It is active inside the timed call: every
    torch function the call makes passes through it on the host (device events time the
    device; a host that falls behind shows in the trials' ``reps_queued``)."""

    def __init__(self, region: torch.Tensor) -> None:
        super().__init__()
        self.region, self.offset = region, 0

    def __enter__(self) -> FromRegion:
        self.offset = 0
        return super().__enter__()

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        request = _request(func, args, kwargs)
        if request is None or not _same_device(request[2], self.region.device):
            return func(*args, **kwargs)
        shape, dtype, _, nbytes = request
        if self.offset + nbytes > self.region.numel():
            return func(*args, **kwargs)
        view = self.region.narrow(0, self.offset, nbytes).view(dtype).view(shape)
        self.offset += span_bytes(nbytes)
        return view


def output_bytes(fn: Any, inputs: tuple[Any, ...], device: torch.device) -> int:
    """What one call allocates on ``device`` through torch.empty / empty_like, each request
    rounded up to 4 KiB (a call made to see it)."""
    with Recording(device) as recording:
        fn(*inputs)
    return sum(recording.spans)


def served_from(fn: Any, inputs: tuple[Any, ...], region: torch.Tensor) -> Any:
    """One call of ``fn`` on ``inputs`` with its allocations served from ``region``."""
    mode = FromRegion(region)

    def call() -> Any:
        with mode:
            return fn(*inputs)

    return call
