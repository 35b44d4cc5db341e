"""A simulated GPU for testing the measurement loop without hardware.

Work runs synchronously on a simulated device clock. A kernel's duration is its cycle
count divided by the current SM clock, and the clock can follow a script (e.g. fall
from boost to a power-capped level), so warm-up and clock attribution can be tested.
A synchronize waits in real time for the simulated work still queued, as a GPU's does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kperf.core.telemetry import Reading
from kperf.core.timing import Measurement, Plan, measure

# a plan that measures in milliseconds on the fakes: short trials, no warm-up minimum
FAST = dict(min_trial_s=0.002, warmup_min_s=0.0, trials=8)


@dataclass
class FakeGpu:
    """A GPU and the host that feeds it, each on its own simulated clock.

    Each launch costs the host ``launch_overhead_s``; work starts when the GPU is free and
    the host has queued it. So events around a lone call read the launch too, a flush or
    hold in front hides it, and a host slower than the work it queues falls behind."""

    clock_mhz: Callable[[float], float] = lambda t: 1500.0  # clock as a function of device time
    launch_overhead_s: float = 5e-6  # host seconds to launch a kernel or a graph
    now: float = 0.0  # device time, seconds: when the GPU is free
    host: float = 0.0  # host time on the same axis: when the host has queued what it has
    flushes: int = 0
    flushes_by_reading: int = 0
    launches: int = 0
    graphs: int = 0
    holds: list[float] = field(default_factory=list)
    supports_graphs: bool = True
    name: str = "FakeGPU"
    in_graph: bool = False

    def _start(self) -> None:  # the GPU reaches work the host queued just now
        self.now = max(self.now, self.host)

    def run_cycles(self, cycles: float) -> None:
        if not self.in_graph:
            self.host += self.launch_overhead_s
        self._start()
        self.launches += 1
        self.now += cycles / (self.clock_mhz(self.now) * 1e6)

    # --- kperf.core.device.Device protocol
    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def synchronize(self) -> None:
        """Waits, on the real clock too, for the work still queued: the loop reads how far
        the host was ahead of the GPU from how long its synchronize waits."""
        until = time.perf_counter() + max(0.0, self.now - self.host)
        while time.perf_counter() < until:
            pass
        self.host = self.now = max(self.now, self.host)

    def flush_l2(self, by_reading: bool = False) -> None:
        self.flushes += 1
        self.flushes_by_reading += by_reading
        self._start()
        self.now += 50e-6

    def hold(self, seconds: float) -> None:
        self.holds.append(seconds)
        self._start()
        self.now += seconds

    def capture(self, calls: list[Callable[[], Any]]) -> Callable[[], None]:
        self.graphs += 1

        def replay() -> None:
            self.host += self.launch_overhead_s  # one launch for the whole graph
            self.in_graph = True
            try:
                for call in calls:
                    call()
            finally:
                self.in_graph = False

        return replay


@dataclass
class FakeEvent:
    gpu: FakeGpu
    t: float = 0.0

    def record(self) -> None:
        self.gpu._start()
        self.t = self.gpu.now

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 1e3


@dataclass
class FakeKernel:
    gpu: FakeGpu
    cycles: float
    calls: int = 0

    def __call__(self) -> None:
        self.calls += 1
        self.gpu.run_cycles(self.cycles)


@dataclass
class ScriptedSource:
    """Telemetry that reports the fake GPU's clock, with host time mapped to device time."""

    gpu: FakeGpu
    host_to_device: Callable[[float], float]
    backend: str = "fake"
    lag_s: float = 0.0
    reason: str = "scripted"
    reads: int = 0
    throttle_bits: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def read(self) -> Reading:
        import time

        self.reads += 1
        t = time.perf_counter()
        return Reading(t=t, sm_clock_mhz=self.gpu.clock_mhz(self.host_to_device(t)),
                       throttle_bits=self.throttle_bits)

    def identity(self) -> dict[str, Any]:
        return {"telemetry": "fake"}

    def close(self) -> None:
        pass


def measure_on_a_counter(counter_period_s: float, plan: Plan, counter_w: float = 300.0,
                         reading_w: float = 300.0, counter: bool = True) -> Measurement:
    """``measure`` of a 1 ms kernel (1 ms of host time too) at 1500 MHz on a board drawing
    ``counter_w`` of a 700 W limit, its energy counter moving every ``counter_period_s``
    (NVML's: ~100 ms; none without ``counter``), its averaged power reading ``reading_w``
    and its temperature rising 1 C every 100 ms."""
    gpu, began = FakeGpu(), time.perf_counter()

    def kernel() -> None:
        time.sleep(0.001)
        gpu.run_cycles(1500e6 * 1e-3)

    class Board(ScriptedSource):
        def read(self) -> Reading:
            t = time.perf_counter() - began
            counted = counter_period_s * (t // counter_period_s)
            return Reading(t=began + t, sm_clock_mhz=1500.0, power_w=reading_w,
                           power_limit_w=700.0, throttle_bits=0, temperature_c=40 + t * 10,
                           energy_j=1000.0 + counter_w * counted if counter else None)

    return measure([kernel], gpu, plan, Board(gpu, host_to_device=lambda t: t),
                   sampler_period_s=0.005)
