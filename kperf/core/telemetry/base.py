"""Telemetry data types, the window summary, and the background sampler."""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import statistics
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
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
    power_limit_w: float | None = None  # the enforced board power limit (cap) now


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
    # the energy counter interpolated at the window's (shifted) ends; else mean power x span
    energy_j: float | None = None
    power_limit_w: float | None = None  # the lowest enforced limit seen in the window

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def or_bits(masks: Iterable[int | None]) -> int | None:
    """Throttle bits seen at any time (bitwise OR); None when no mask was read at all."""
    read = [m for m in masks if m is not None]
    return functools.reduce(operator.or_, read, 0) if read else None


def _values(readings: Sequence[Reading], attr: str) -> list[float]:
    return [v for r in readings if (v := getattr(r, attr)) is not None]


def summarize(readings: Sequence[Reading], t0: float, t1: float, lag_s: float) -> WindowStats:
    """Summarize the readings taken in [t0 + lag, t1 + lag].

    If the window holds no reading (shorter than the refresh period), the nearest reading
    after the shifted start stands in, so every window carries the freshest state known.
    """
    lo, hi = t0 + lag_s, t1 + lag_s
    energy = window_energy(readings, lo, hi)
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
    limits = _values(inside, "power_limit_w")
    return WindowStats(
        n_readings=len(inside),
        sm_clock_mhz_min=min(sm) if sm else None,
        sm_clock_mhz_median=statistics.median(sm) if sm else None,
        sm_clock_mhz_mean=statistics.fmean(sm) if sm else None,
        mem_clock_mhz_median=statistics.median(mem) if mem else None,
        temperature_c_max=max(temp) if temp else None,
        power_w_mean=statistics.fmean(power) if power else None,
        throttle_bits_or=or_bits(r.throttle_bits for r in inside),
        energy_j=energy if energy is not None else (
            statistics.fmean(power) * (hi - lo) if power else None),
        power_limit_w=min(limits) if limits else None,
    )


def counter_at(readings: Sequence[Reading], t: float) -> float | None:
    """The cumulative energy counter at host time ``t``, linear between the two readings
    around it; None outside the readings or without a counter."""
    points = [(r.t, r.energy_j) for r in readings if r.energy_j is not None]
    for (ta, ea), (tb, eb) in itertools.pairwise(points):
        if ta <= t <= tb:
            return ea if tb == ta else ea + (eb - ea) * (t - ta) / (tb - ta)
    return None


def window_energy(readings: Sequence[Reading], lo: float, hi: float) -> float | None:
    """Joules the device used in [lo, hi] by its energy counter.

    Differences of readings *inside* a 100 ms window were mostly 0.0 or missing on an
    H200 on 2026-12-01 (the counter moves less often than it is polled), so the counter
    is interpolated at both ends from the readings around them.
    """
    start, end = counter_at(readings, lo), counter_at(readings, hi)
    if start is None or end is None or end < start:
        return None
    return end - start


@dataclass
class Sampler:
    """Poll a source every ``period_s`` on a daemon thread while timing runs.

    NVML refreshes clocks and power only every ~100 ms, so polling faster than 50 ms
    reads the same values again. On an H200 (2026-12-01) a 10 ms sampler moved a
    power-capped GEMM's median by +2.0% in one A/B and 50 ms by +1.1%, within that A/B's
    own 3.9% spread (docs/journal/2026-12-01.md); the default is 50 ms.
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

    @contextlib.contextmanager
    def polling_every(self, period_s: float) -> Iterator[None]:
        """Poll faster for a while (the energy burst), then at the usual period again."""
        usual, self.period_s = self.period_s, period_s
        try:
            yield
        finally:
            self.period_s = usual

    def counter_power(self, t0: float, t1: float, min_span_s: float = 0.0) -> float | None:
        """Mean watts in [t0, t1] (shifted by the lag) from the energy counter's own
        update instants: the first and last change of the counter inside the span.

        NVML's counter moves only every ~100 ms (H200, 2026-12-01, docs/journal/2026-12-01.md), so
        the difference of two readings says little about a span of a few hundred ms; between two of
        its updates, though, it holds exactly the energy used. Polled every few ms, the
        update instants are known to that precision. None with fewer than two updates, or
        with its first and last less than ``min_span_s`` apart.
        """
        updates = self.counter_updates(t0, t1)
        if len(updates) < 2 or updates[-1][0] - updates[0][0] <= max(min_span_s, 0.0):
            return None
        (ta, ea), (tb, eb) = updates[0], updates[-1]
        return (eb - ea) / (tb - ta)

    def counter_updates(self, t0: float, t1: float) -> list[tuple[float, float]]:
        """(host time, joules) of each change of the energy counter in [t0, t1], shifted
        by the lag: the instants ``counter_power`` measures between."""
        lo, hi = t0 + self.source.lag_s, t1 + self.source.lag_s
        points = [(r.t, r.energy_j) for r in list(self.readings) if r.energy_j is not None]
        return [(t, e) for (_, e0), (t, e) in itertools.pairwise(points)
                if e != e0 and lo <= t <= hi]

    def reading_at(self, t: float) -> Reading | None:
        """The board's state at host time ``t`` as the source saw it (``t`` shifted by the
        lag): the last reading by then, else the first one; None without readings."""
        readings = list(self.readings)
        before = [r for r in readings if r.t <= t + self.source.lag_s]
        return before[-1] if before else (readings[0] if readings else None)

    def has_energy(self) -> bool:
        """Whether the source has delivered an energy counter or a power reading."""
        return any(r.energy_j is not None or r.power_w is not None for r in list(self.readings))

    def last_reading_t(self) -> float:
        readings = self.readings
        return readings[-1].t if readings else float("-inf")

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
