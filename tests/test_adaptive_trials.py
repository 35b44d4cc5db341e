"""Adaptive trials in the history's runs (kperf/core/timing.py, ``Plan.stop_rel_ci``): a case
stops sampling once its median is known to its class's precision, within a minimum and a
maximum, and its record says how many trials it took and why it stopped."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from kperf.core.timing import Plan, measure
from kperf.core.trials import median_rel_half_width, trials_stop
from kperf.history.bench import trials_summary
from kperf.project import DEFAULTS

from ._bench import asked_plans
from .fakes import FakeGpu, FakeKernel

REPO = Path(__file__).resolve().parent.parent
ADAPTIVE = dict(min_trial_s=0.002, warmup_min_s=0.0, trials=10, min_trials=3,
                stop_rel_ci=0.001, energy_s=0)


def test_the_half_width_is_students_t_times_the_medians_standard_error() -> None:
    rng = np.random.default_rng(1)
    for n in (2, 3, 5, 10, 31, 40):
        samples = list(1.0 + 0.01 * rng.standard_normal(n))
        t = sps.t.ppf(0.975, n - 1) if n <= 31 else 1.96
        expected = (t * math.sqrt(math.pi / 2) * np.std(samples, ddof=1) / math.sqrt(n)
                    / np.median(samples))
        assert median_rel_half_width(samples) == pytest.approx(expected, rel=1e-3), n
    assert median_rel_half_width([1.0]) is None and median_rel_half_width([]) is None


def test_trials_stop_once_precise_never_before_the_minimum_nor_at_the_cap() -> None:
    plan = Plan(**ADAPTIVE)
    steady = [1.0, 1.0002, 0.9999]  # sd 0.015%: half-width 0.05%
    assert trials_stop(plan, False, steady[:2]) == "max_trials"  # below min_trials
    assert trials_stop(plan, False, steady) == "precise"
    assert trials_stop(plan, False, [1.0, 1.004, 0.997]) == "max_trials"  # 1.1%
    assert trials_stop(plan, True, steady) == "at_cap"
    assert trials_stop(Plan(**{**ADAPTIVE, "stop_rel_ci": 0.0}), False, steady) == "fixed"


def _jittery(gpu: FakeGpu, level_s: float, sd: float, seed: int) -> FakeKernel:
    """A kernel whose every call takes ``level_s`` times a log-normal jitter of ``sd``."""
    rng = np.random.default_rng(seed)
    kernel = FakeKernel(gpu, cycles=0.0)

    def call() -> None:
        kernel.calls += 1
        gpu.run_cycles(1500e6 * level_s * math.exp(sd * rng.standard_normal()))

    return call  # type: ignore[return-value]


def test_a_steady_kernel_stops_at_the_minimum_and_says_so() -> None:
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 200e-6)], gpu, Plan(**ADAPTIVE))
    assert (len(m.samples), m.trials_stop) == (3, "precise")
    assert m.median_rel_half_width == pytest.approx(0.0, abs=1e-9)
    record = m.as_record()
    assert record["trials_stop"] == "precise" and len(record["samples"]) == 3


def test_a_noisy_kernel_samples_until_the_most_and_says_so() -> None:
    gpu = FakeGpu()  # 10 reps a trial, 5% a call: the trials' medians scatter ~2%
    m = measure([_jittery(gpu, 200e-6, 0.05, 2)], gpu, Plan(**ADAPTIVE))
    assert (len(m.samples), m.trials_stop) == (10, "max_trials")
    assert m.median_rel_half_width is not None and m.median_rel_half_width > 0.001


def test_a_moderately_noisy_kernel_stops_where_its_median_is_known() -> None:
    gpu = FakeGpu()  # 0.5% a call, 50 reps a trial: trials ~0.09% apart
    plan = Plan(**{**ADAPTIVE, "min_trial_s": 0.01})
    m = measure([_jittery(gpu, 200e-6, 0.005, 3)], gpu, plan)
    assert m.trials_stop == "precise" and 3 <= len(m.samples) < 10
    assert m.median_rel_half_width <= plan.stop_rel_ci
    assert median_rel_half_width(m.samples[:-1]) > plan.stop_rel_ci  # not one trial later


def test_without_a_target_every_measurement_takes_its_trials() -> None:
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 200e-6)], gpu,
                Plan(**{**ADAPTIVE, "stop_rel_ci": 0.0}))
    assert (len(m.samples), m.trials_stop) == (10, "fixed")


def test_each_case_gets_its_classes_precision(tmp_path: Path) -> None:
    from kperf.suites.timed import PRECISION_SHARE, trial_precision

    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    minimum = {name: k.get("min_ratio") for name, k in raw["classes"].items()}
    norm = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"
    decode = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'triton')"
    gemm = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'tilelang')"
    static = "bench_gemm.GemmRegisters.track_value('square-8192', 'fp16', 'triton')"
    assert trial_precision(norm) == pytest.approx(PRECISION_SHARE * minimum["bandwidth"])
    assert trial_precision(decode) == pytest.approx(PRECISION_SHARE * minimum["decode"])
    assert trial_precision(gemm) == pytest.approx(PRECISION_SHARE * minimum["compute"])
    assert trial_precision(static) == 0.0  # an exact class has no min_ratio
    raw["rules"] = [r for r in raw["rules"] if r["match"] != ".*"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(raw))
    assert trial_precision("bench_x.XTime.track_time('a')", path) == 0.0  # no rule


@pytest.mark.parametrize(("plan", "expected"), [({}, 0.001), ({"stop_rel_ci": 0}, 0)])
def test_the_suite_asks_for_its_cases_precision_unless_the_plan_names_one(
        monkeypatch: pytest.MonkeyPatch, plan: dict[str, float], expected: float) -> None:
    from benchmarks import bench_rmsnorm

    monkeypatch.setenv("KPERF_PLAN", json.dumps(plan))
    spec = {"op": "rmsnorm", "case": "llama3-8b.hidden", "dtype": "bf16", "backend": "triton"}
    for asked in asked_plans([bench_rmsnorm.RmsnormTime(), bench_rmsnorm.RmsnormEnergy()], spec):
        assert asked["stop_rel_ci"] == pytest.approx(expected)


def test_the_runs_summary_counts_trials_and_why_they_stopped(tmp_path: Path) -> None:
    def write(name: str, samples: int, stop: str, warmup_s: float, cool: bool,
              age_s: float = 0.0, retaken: int | None = None) -> None:
        path = tmp_path / "m" / "c-env" / "bench" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = {"samples": [1.0] * samples, "trials_stop": stop, "warmup_s": warmup_s,
             "warmup_cool": cool, **({} if retaken is None else {"trials_retaken": retaken})}
        path.write_text(json.dumps({"measurement": m}))
        os.utime(path, (time.time() - age_s,) * 2)

    for i, (n, stop, warm, cool) in enumerate([(3, "precise", 0.31, True),
                                               (4, "precise", 1.42, False),
                                               (10, "at_cap", 1.71, False)]):
        write(f"case{i}", n, stop, warm, cool)
    write("earlier", 10, "fixed", 9.0, True, age_s=3600, retaken=2)
    line = trials_summary(tmp_path, since=time.time() - 60)
    assert line == ("kperf: trials: 3 measurements, median 4 (3-10), 17 in all; "
                    "stopped: 2 precise, 1 at_cap; warm-ups: median 1.42 s, 1 of 3 ended "
                    "far from the power cap")
    write("case1", 4, "precise", 1.42, False, retaken=1)  # the host fell behind once
    write("case2", 10, "at_cap", 1.71, False, retaken=0)
    assert trials_summary(tmp_path, since=time.time() - 60) == (
        "kperf: trials: 3 measurements, median 4 (3-10), 17 in all; 1 taken again, the host "
        "behind the GPU (kperf/core/timing.py); stopped: 2 precise, 1 at_cap; warm-ups: median "
        "1.42 s, 1 of 3 ended far from the power cap")
    assert trials_summary(tmp_path / "none") == ""


@pytest.mark.gpu
def test_on_the_gpu_a_bandwidth_bound_kernel_stops_early_where_ten_trials_agree() -> None:
    """A 256 MB copy (~130 us on an H200): its trials agree far within 0.1%, so it stops
    well before ten trials, and where it would stop in a ten-trial measurement the median
    is that of all ten. (Two measurements one after the other sat 0.5% apart on an H200,
    2026-12-03: a measurement's level moves more than its trials' median is uncertain, so
    the comparison is within one measurement.)"""
    import statistics

    import torch

    from kperf.core.device import TorchDevice

    src = torch.randn(1 << 26, device="cuda")
    dst = torch.empty_like(src)
    calls = [lambda: dst.copy_(src)]
    device = TorchDevice(flush_bytes=1 << 27)
    base = dict(min_trial_s=0.1, warmup_min_s=1.0, trials=10, energy_s=0)
    fixed = measure(calls, device, Plan(**base))
    adaptive = measure(calls, device, Plan(**base, stop_rel_ci=0.001, min_trials=3))
    stop_at = next(n for n in range(3, 11)
                   if (median_rel_half_width(fixed.samples[:n]) or 1.0) <= 0.001)
    early, all_ten = (statistics.median(fixed.samples[:stop_at]),
                      statistics.median(fixed.samples))
    print(f"ten trials {all_ten * 1e6:.2f} us, the first {stop_at} {early * 1e6:.2f} us; "
          f"adaptive {statistics.median(adaptive.samples) * 1e6:.2f} us "
          f"({len(adaptive.samples)}, {adaptive.trials_stop}, "
          f"half-width {adaptive.median_rel_half_width:.4%})")
    assert fixed.trials_stop == "fixed" and len(fixed.samples) == 10
    assert adaptive.trials_stop == "precise" and len(adaptive.samples) < 10
    assert stop_at < 10 and early == pytest.approx(all_ten, rel=0.002)
