"""The timing loop records a telemetry summary per trial window, clock drops included."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kperf.core import timing
from kperf.core.telemetry import Reading

CYCLES_PER_CALL = 4.2e6  # 2 ms at 2100 MHz


class GpuModel:
    """The clock the fake kernel runs at; the test drops it at a chosen synchronize."""

    def __init__(self, mhz: float, drop_to: float, drop_after_syncs: int) -> None:
        self.mhz, self.drop_to, self.drop_after = mhz, drop_to, drop_after_syncs
        self.syncs = 0
        self.device_s = 0.0
        self.history: list[tuple[float, float]] = [(time.perf_counter(), mhz)]
        self.lock = threading.Lock()

    def run_call(self) -> None:
        seconds = CYCLES_PER_CALL / (self.mhz * 1e6)
        self.device_s += seconds  # the device time events report
        time.sleep(seconds)  # so host time passes and the sampler reads meanwhile

    def synchronize(self) -> None:
        self.syncs += 1
        if self.syncs == self.drop_after:
            with self.lock:
                self.mhz = self.drop_to
                self.history.append((time.perf_counter(), self.mhz))

    def clock_at(self, t: float) -> float:
        with self.lock:
            times = [h[0] for h in self.history]
            return self.history[max(0, bisect.bisect_right(times, t) - 1)][1]


class FakeEvent:
    def __init__(self, gpu: GpuModel) -> None:
        self.gpu, self.at = gpu, 0.0

    def record(self) -> None:
        self.at = self.gpu.device_s

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3


class FakeDevice:
    name = "fake"
    supports_graphs = False

    def __init__(self, gpu: GpuModel) -> None:
        self.gpu = gpu

    def event(self) -> FakeEvent:
        return FakeEvent(self.gpu)

    def synchronize(self) -> None:
        self.gpu.synchronize()

    def flush_l2(self, by_reading: bool = False) -> None:
        pass

    def hold(self, seconds: float) -> None:
        pass

    def capture(self, calls: list[Callable[[], Any]]) -> Callable[[], None]:
        raise AssertionError("graphs are not supported by this fake")


class LaggedSource:
    """Reports the clock as it was ``lag_s`` ago, like a driver that trails the work."""

    backend = "scripted"
    reason = "test"
    lag_s = 0.02

    def __init__(self, gpu: GpuModel) -> None:
        self.gpu = gpu

    def read(self) -> Reading:
        t = time.perf_counter()
        mhz = self.gpu.clock_at(t - self.lag_s)
        return Reading(t=t, sm_clock_mhz=mhz, mem_clock_mhz=1300.0, temperature_c=60.0,
                       power_w=500.0, throttle_bits=0x4 if mhz < 2000 else 0)

    def identity(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def test_measure_records_a_clock_drop_in_the_windows() -> None:
    # syncs: 1 estimate + 1 trial's worth to see whether the host keeps ahead + 3 warm-up
    # trials (identical values settle at once) + trials; the drop comes after trial index 2
    gpu = GpuModel(mhz=2100, drop_to=1400, drop_after_syncs=1 + 1 + 3 + 3)
    # host_ahead_reps=0, estimate_retakes=0: this fake runs its calls on the host, which is
    # never ahead of it (a retaken estimate would be one sync more before the drop)
    plan = timing.Plan(trials=6, min_trial_s=0.03, min_reps=5, warmup_min_s=0.0,
                       warmup_max_s=5.0, flush_l2=False, estimate_calls=3, host_ahead_reps=0.0,
                       estimate_retakes=0)
    m = timing.measure([gpu.run_call], FakeDevice(gpu), plan, LaggedSource(gpu),
                       sampler_period_s=0.01)
    assert m.warmup_trials == 3 and m.settled
    assert m.telemetry_backend == "scripted" and len(m.windows) == 6
    medians = [w.sm_clock_mhz_median for w in m.windows]
    assert medians[:3] == [2100] * 3 and medians[3:] == [1400] * 3
    assert [w.throttle_bits_or for w in m.windows] == [0, 0, 0, 4, 4, 4]
    assert all(w.n_readings >= 1 for w in m.windows)
    # the samples slow down by the clock ratio: time tracks the clock
    assert m.samples[4] / m.samples[1] == pytest.approx(2100 / 1400, rel=1e-9)
    record = m.as_record()
    assert record["windows"][5]["sm_clock_mhz_min"] == 1400


class BandwidthGpu:
    """A memory-bound kernel: 1 ms a call whatever the SM clock, which meanwhile falls
    linearly from 1980 to 1500 MHz over the first ``ramp_s`` (the power average climbing
    to the cap after idle), then holds."""

    def __init__(self, ramp_s: float) -> None:
        self.ramp_s, self.start, self.device_s = ramp_s, time.perf_counter(), 0.0

    def run_call(self) -> None:
        self.device_s += 1e-3
        time.sleep(1e-3)

    def synchronize(self) -> None:
        pass

    def clock_at(self, t: float) -> float:
        return 1980.0 - 480.0 * min(1.0, max(0.0, t - self.start) / self.ramp_s)


class RampSource(LaggedSource):
    lag_s = 0.0

    def read(self) -> Reading:
        t = time.perf_counter()
        return Reading(t=t, sm_clock_mhz=self.gpu.clock_at(t))


def test_warm_up_waits_for_the_clock_even_when_times_agree() -> None:
    # every trial reads the same time from the first one on; only the clock says the GPU
    # is not in its steady state yet: no sample may be taken before the clock has settled
    gpu = BandwidthGpu(ramp_s=0.3)
    plan = timing.Plan(trials=3, min_trial_s=0.02, min_reps=5, warmup_min_s=0.0,
                       warmup_max_s=3.0, flush_l2=False, estimate_calls=3, energy_s=0)
    m = timing.measure([gpu.run_call], FakeDevice(gpu), plan, RampSource(gpu),
                       sampler_period_s=0.005)
    assert len(set(m.samples)) == 1  # the times never moved
    assert m.settled and m.warmup_s >= 0.2 and m.warmup_trials > 3
    for w in m.windows:
        assert w.sm_clock_mhz_median == pytest.approx(1500, abs=15)
