"""The measurement loop's logic on a simulated GPU: modes, warm-up, sample counts, clocks."""

from __future__ import annotations

import statistics

import pytest

from harness.timing import Plan, measure

from .fakes import FakeGpu, FakeKernel

FAST = dict(min_trial_s=0.002, warmup_min_s=0.0, trials=8)


def test_long_kernel_is_event_timed_with_a_flush_per_rep():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)  # 200 us at 1500 MHz
    m = measure([kernel], gpu, Plan(**FAST))
    assert m.mode == "events" and m.calls_per_rep == 1
    assert len(m.samples) == 8 and m.number == m.reps
    assert gpu.flushes >= m.reps * 8  # every timed rep was preceded by a flush
    for s in m.samples:  # the flush hides the launch gap: the kernel's own time is read
        assert s == pytest.approx(200e-6, rel=1e-6)
    assert m.asv_result() == {"samples": m.samples, "number": m.number}


def test_short_kernel_switches_to_graph_replay_and_hides_launch_overhead():
    gpu = FakeGpu(launch_overhead_s=14e-6)
    kernel = FakeKernel(gpu, cycles=1500e6 * 2e-6)  # a ~2 us kernel
    m = measure([kernel], gpu, Plan(**FAST, flush_l2=False))
    assert m.mode == "graph" and gpu.graphs == 1
    assert m.calls_per_rep >= 10
    # events around one launch would read 2 + 14 us; replay reads the kernel itself (<10% off)
    assert statistics.median(m.samples) == pytest.approx(2e-6, rel=0.1)


def test_reps_fill_the_minimum_trial_window():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 1e-3)  # 1 ms
    m = measure([kernel], gpu, Plan(trials=3, min_trial_s=0.02, warmup_min_s=0.0, min_reps=2))
    assert m.reps == 20  # 20 x 1 ms >= the 20 ms window


def test_warm_up_runs_until_the_clock_has_settled():
    # boost clock for the first 50 ms of device time, then the power-capped level: a steady
    # boost is indistinguishable from a steady state, so the minimum warm-up must outlast it
    gpu = FakeGpu(clock_mhz=lambda t: 1980.0 if t < 0.05 else 1500.0)
    kernel = FakeKernel(gpu, cycles=1500e6 * 500e-6)
    m = measure([kernel], gpu, Plan(trials=5, min_trial_s=0.005, warmup_min_s=0.1),
                clock=lambda: gpu.now)
    assert m.settled and m.warmup_trials > 3 and m.warmup_s >= 0.1
    # no sample was taken at boost: all read the capped clock's time
    assert max(m.samples) == pytest.approx(min(m.samples), rel=1e-6)
    assert m.samples[0] == pytest.approx(500e-6, rel=1e-6)


def test_warm_up_gives_up_at_its_time_limit_and_says_so():
    gpu = FakeGpu(clock_mhz=lambda t: 1980.0 / (1.0 + 10.0 * t))  # falls forever: never settles
    kernel = FakeKernel(gpu, cycles=1500e6 * 300e-6)
    m = measure([kernel], gpu, Plan(trials=2, min_trial_s=0.001, warmup_min_s=0.0,
                                    warmup_max_s=0.05, settle_tol=1e-9), clock=lambda: gpu.now)
    assert not m.settled and m.warmup_s >= 0.05


def test_rotating_inputs_are_all_used():
    gpu = FakeGpu()
    kernels = [FakeKernel(gpu, cycles=1500e6 * 100e-6) for _ in range(4)]
    measure(kernels, gpu, Plan(**FAST))
    assert all(k.calls > 10 for k in kernels)
    assert max(k.calls for k in kernels) - min(k.calls for k in kernels) <= 1
