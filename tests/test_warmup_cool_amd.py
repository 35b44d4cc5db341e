"""The cool warm-up rule (``Plan.cool_warmup_min_s``) through the AMD telemetry: the real
amdsmi package against the fake libamd_smi.so, its energy accumulator advanced as a board
drawing a set power would advance it. Never run on AMD hardware."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kperf.core.telemetry.amd import AmdSmiSource
from kperf.core.timing import Plan, measure
from tests.fake_amdsmi import FakeState, use_fake_amdsmi

from .fakes import FakeGpu

COUNT_J = 15.259e-6  # the fake's counter_resolution, as MI300X reports it (uJ a count)
COOL = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.8, cool_warmup_min_s=0.2,
            warmup_max_s=3.0, energy_s=0)


@pytest.fixture
def amd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeState:
    return use_fake_amdsmi(monkeypatch, tmp_path)


def _measure_drawing(amd: FakeState, watts: float):
    """``measure`` of a 1 ms kernel while the fake board reads ``watts`` of its 750 W cap and
    its energy accumulator moves every 10 ms by what ``watts`` uses in that time."""
    amd.set(sclk_mhz=2100, power_w=int(watts), energy_acc=0)
    stop, began = threading.Event(), time.perf_counter()

    def accumulate() -> None:
        while not stop.wait(0.01):
            amd.set(energy_acc=int(watts * (time.perf_counter() - began) / COUNT_J))

    gpu = FakeGpu()

    def kernel() -> None:
        time.sleep(0.001)
        gpu.run_cycles(2100e6 * 1e-3)

    ticking = threading.Thread(target=accumulate, daemon=True)
    ticking.start()
    source = AmdSmiSource(0)
    try:
        return measure([kernel], gpu, COOL, source, sampler_period_s=0.005)
    finally:
        stop.set()
        ticking.join()
        source.close()


def test_an_mi300x_far_from_its_cap_ends_the_warm_up_early(amd: FakeState) -> None:
    m = _measure_drawing(amd, 400.0)
    assert m.telemetry_backend == "amdsmi"
    assert m.warmup_cool and COOL.cool_warmup_min_s <= m.warmup_s < COOL.warmup_min_s


def test_an_mi300x_near_its_cap_warms_up_in_full(amd: FakeState) -> None:
    m = _measure_drawing(amd, 700.0)  # 93% of 750 W
    assert not m.warmup_cool and m.warmup_s >= COOL.warmup_min_s
