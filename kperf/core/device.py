"""The device operations timing needs, behind a small protocol so tests can fake a GPU.

``TorchDevice`` uses torch.cuda, which is CUDA on NVIDIA and HIP on ROCm builds of
torch: the same events, graphs and streams on both vendors.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Protocol


class Event(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end: Event) -> float: ...  # milliseconds, like torch.cuda.Event


class Device(Protocol):
    name: str
    supports_graphs: bool

    def event(self) -> Event: ...

    def synchronize(self) -> None: ...

    def flush_l2(self, by_reading: bool = False) -> None: ...

    def move_flush(self, pad_bytes: int) -> None: ...

    def hold(self, seconds: float) -> None: ...

    def capture(self, calls: list[Callable[[], Any]]) -> Callable[[], None]: ...


class TorchDevice:
    """A CUDA or ROCm GPU seen through torch.cuda."""

    def __init__(self, flush_bytes: int, index: int = 0) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA/ROCm GPU visible to torch: GPU timings cannot run here")
        self._torch = torch
        self.index = index
        props = torch.cuda.get_device_properties(index)
        self.name = props.name
        self.supports_graphs = True
        # Writing a buffer twice the last-level cache evicts whatever the kernel left there.
        self._flush = torch.empty(max(flush_bytes, 4) // 4, dtype=torch.int32,
                                  device=f"cuda:{index}")
        self._sink = torch.empty((), dtype=torch.int32, device=f"cuda:{index}")
        self._clock_hz = props.clock_rate * 1e3 if hasattr(props, "clock_rate") else 1.5e9

    def event(self) -> Event:
        return self._torch.cuda.Event(enable_timing=True)

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self.index)

    def flush_l2(self, by_reading: bool = False) -> None:
        """Evict the cache: by writing the flush buffer, or by reading it (plan key
        ``flush_by_reading``). A write leaves the cache full of dirty lines, which the
        timed call then writes back to memory as it evicts them; a read leaves clean ones."""
        if by_reading:
            self._torch.sum(self._flush, 0, dtype=self._torch.int32, out=self._sink)
        else:
            self._flush.zero_()

    def move_flush(self, pad_bytes: int) -> None:
        """The flush buffer anew, behind a pad of ``pad_bytes`` (kept): other pages of
        device memory, for experiments on where buffers lie (``placements``)."""
        self._flush_pad = self._torch.empty(pad_bytes, dtype=self._torch.uint8,
                                            device=self._flush.device)
        self._flush = self._torch.empty_like(self._flush)

    def hold(self, seconds: float) -> None:
        """Enqueue a spin kernel so the host can queue the timed work behind it.

        Without it, the first launches of a batch start while the host is still
        enqueueing, and launch latency leaks into the device-side interval.
        """
        self._torch.cuda._sleep(int(seconds * self._clock_hz))

    def capture(self, calls: list[Callable[[], Any]]) -> Callable[[], None]:
        torch = self._torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm the calls on the capture stream first
            for call in calls[:2]:
                call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for call in calls:
                call()
        return graph.replay


class _HostEvent:
    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: _HostEvent) -> float:
        return (end.t - self.t) * 1e3


class CpuDevice:
    """Calls that run synchronously on the host (CPU tensors, Triton's interpreter).

    A host timer is exact here because nothing is asynchronous. For runs without a GPU
    (``KPERF_DEVICE=cpu``): the CPU-side tests drive the timed suites through it.
    """

    name = "cpu"
    supports_graphs = False

    def event(self) -> Event:
        return _HostEvent()

    def synchronize(self) -> None:
        pass

    def flush_l2(self, by_reading: bool = False) -> None:
        pass

    def move_flush(self, pad_bytes: int) -> None:
        pass

    def hold(self, seconds: float) -> None:
        pass

    def capture(self, calls: list[Callable[[], Any]]) -> Callable[[], None]:
        raise NotImplementedError("no graph replay on the host")


def open_device(flush_bytes: int, index: int = 0) -> Device:
    """The device ``KPERF_DEVICE`` names: ``gpu`` (default; CUDA or ROCm via torch) or
    ``cpu``. A GPU run never falls back to the CPU: a missing GPU is an error."""
    kind = os.environ.get("KPERF_DEVICE", "gpu")
    if kind == "cpu":
        return CpuDevice()
    if kind != "gpu":
        raise ValueError(f"KPERF_DEVICE={kind!r}: expected 'gpu' or 'cpu'")
    return TorchDevice(flush_bytes=flush_bytes, index=index)
