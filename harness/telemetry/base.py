"""Telemetry data types, the window summary, and the background sampler."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Reading:
    t: float  # host time.perf_counter() when read
    sm_clock_mhz: float | None = None  # SM (NVIDIA) / GFX shader (AMD) clock
    mem_clock_mhz: float | None = None
    temperature_c: float | None = None  # hottest sensor the source offers
    power_w: float | None = None
    # raw vendor bits: NVML clock-event reasons / amdsmi throttle_status
    throttle_bits: int | None = None
    energy_j: float | None = None  # cumulative counter, when the device has one


class Source(Protocol):
    backend: str  # "nvml" | "amdsmi" | "sysfs" | "none"
    lag_s: float  # how far the readings trail the work (NVML ~50 ms)
    reason: str  # why this backend (or why none)

    def read(self) -> Reading: ...

    def identity(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class NullSource:
    backend = "none"
    lag_s = 0.0

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def read(self) -> Reading:
        return Reading(t=time.perf_counter())

    def identity(self) -> dict[str, Any]:
        return {"telemetry": "none", "telemetry_reason": self.reason}

    def close(self) -> None:
        pass


@dataclass
class WindowStats:
    """Telemetry of one timed window (one asv sample)."""

    n_readings: int
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_median: float | None = None
    sm_clock_mhz_mean: float | None = None
    mem_clock_mhz_median: float | None = None
    temperature_c_max: float | None = None
    power_w_mean: float | None = None
    throttle_bits_or: int | None = None
    energy_j: float | None = None  # counter difference across the window

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _values(readings: Sequence[Reading], attr: str) -> list[float]:
    return [v for r in readings if (v := getattr(r, attr)) is not None]


def summarize(readings: Sequence[Reading], t0: float, t1: float, lag_s: float) -> WindowStats:
    """Summarize the readings taken in [t0 + lag, t1 + lag].

    If the window holds no reading (shorter than the refresh period), the nearest reading
    after the shifted start stands in, so every window carries the freshest state known.
    """
    lo, hi = t0 + lag_s, t1 + lag_s
    inside = [r for r in readings if lo <= r.t <= hi]
    if not inside:
        after = [r for r in readings if r.t >= lo]
        inside = after[:1] or list(readings[-1:])
    if not inside:
        return WindowStats(n_readings=0)
    sm = _values(inside, "sm_clock_mhz")
    mem = _values(inside, "mem_clock_mhz")
    temp = _values(inside, "temperature_c")
    power = _values(inside, "power_w")
    bits = [r.throttle_bits for r in inside if r.throttle_bits is not None]
    energy = _values(inside, "energy_j")
    or_bits = 0
    for b in bits:
        or_bits |= b
    return WindowStats(
        n_readings=len(inside),
        sm_clock_mhz_min=min(sm) if sm else None,
        sm_clock_mhz_median=statistics.median(sm) if sm else None,
        sm_clock_mhz_mean=statistics.fmean(sm) if sm else None,
        mem_clock_mhz_median=statistics.median(mem) if mem else None,
        temperature_c_max=max(temp) if temp else None,
        power_w_mean=statistics.fmean(power) if power else None,
        throttle_bits_or=or_bits if bits else None,
        energy_j=(energy[-1] - energy[0]) if len(energy) > 1 else None,
    )


@dataclass
class Sampler:
    """Poll a source every ``period_s`` on a daemon thread while timing runs.

    NVML refreshes clocks and power only every ~100 ms, so polling faster than 50 ms
    reads the same values again. On an H200 (2026-12-01) a 10 ms sampler moved a
    power-capped GEMM's median by +2.0% in one A/B and 50 ms by +1.1%, within that A/B's
    own 3.9% spread (docs/perf.md); the default is 50 ms.
    """

    source: Source
    period_s: float = 0.05
    readings: list[Reading] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        if self.source.backend == "none":
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kperf-telemetry", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.readings.append(self.source.read())
            except Exception:
                self.errors += 1  # a failing read is counted, never raised into the timing
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None

    def window(self, t0: float, t1: float) -> WindowStats:
        return summarize(list(self.readings), t0, t1, self.source.lag_s)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
