"""The measurement loop's logic on a simulated GPU: modes, warm-up, sample counts, clocks."""

from __future__ import annotations

import statistics
import time

import pytest

from kperf.core.timing import Plan, measure
from kperf.core.warmup import _cap_wait_s, _settled
from tools.lab.burst_replay import burst_energy

from .fakes import FAST, FakeGpu, FakeKernel, measure_on_a_counter


def test_long_kernel_is_event_timed_with_a_flush_per_rep():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)  # 200 us at 1500 MHz
    m = measure([kernel], gpu, Plan(**FAST))
    assert m.mode == "events" and m.calls_per_rep == 1
    assert len(m.samples) == 8 and m.number == m.reps
    assert gpu.flushes >= m.reps * 8  # every timed rep was preceded by a flush
    for s in m.samples:  # the flush hides the launch gap: the kernel's own time is read
        assert s == pytest.approx(200e-6, rel=1e-6)


def test_the_plan_says_whether_a_flush_writes_or_reads():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)
    measure([kernel], gpu, Plan(**FAST))
    assert gpu.flushes > 0 and gpu.flushes_by_reading == 0
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)
    m = measure([kernel], gpu, Plan(**FAST).with_overrides(flush_by_reading=True))
    assert gpu.flushes_by_reading == gpu.flushes >= m.reps * 8


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
    # the trace shows each warm-up trial: the boost's faster ones, then the capped level
    trace = m.warmup_trace
    assert len(trace) == m.warmup_trials
    assert trace[-1]["t_s"] == pytest.approx(m.warmup_s, abs=1e-4)  # kept to 0.1 ms
    assert [row["t_s"] for row in trace] == sorted(row["t_s"] for row in trace)
    assert trace[0]["s"] < trace[-1]["s"] == pytest.approx(500e-6, rel=1e-6)
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


def test_each_input_set_keeps_its_own_median_where_the_trials_median_mixes_them():
    # inputs whose places make the kernel 88 or 101 us (an H200's decode GEMM,
    # docs/journal/2026-12-02.md): a trial's median falls on one level or the other, each set's
    # median keeps its own
    gpu = FakeGpu()
    levels_s = (88e-6, 101e-6, 101e-6, 88e-6)
    kernels = [FakeKernel(gpu, cycles=1500e6 * s) for s in levels_s]
    m = measure(kernels, gpu, Plan(**FAST))
    assert m.input_set_medians_s == pytest.approx(list(levels_s), rel=1e-6)
    assert m.as_record()["input_set_medians_s"] == m.input_set_medians_s
    one = measure([FakeKernel(gpu, cycles=1500e6 * 88e-6)], gpu, Plan(**FAST))
    assert one.input_set_medians_s == []  # one set: the samples say it all
    graph = measure([FakeKernel(gpu, cycles=1500e6 * 2e-6)] * 2, gpu,
                    Plan(**FAST, flush_l2=False))
    assert graph.mode == "graph" and graph.input_set_medians_s == []  # a replay mixes sets


def test_each_sample_is_its_trials_median_not_its_mean():
    # every 8th call stalls 10x (an interrupt, a neighbour's burst): one or two per trial of
    # ten reps. The median of a trial is the kernel's time; a mean would be 1.4-2.8x off.
    gpu = FakeGpu()
    calls = 0

    def kernel() -> None:
        nonlocal calls
        calls += 1
        gpu.run_cycles(1500e6 * 200e-6 * (10 if calls % 8 == 0 else 1))

    m = measure([kernel], gpu, Plan(**FAST))
    assert m.mode == "events" and m.reps == 10 and len(m.samples) == 8
    for s in m.samples:
        assert s == pytest.approx(200e-6, rel=1e-6)


SETTLE = Plan(settle_trials=3, settle_tol=0.01)


def test_settled_needs_the_clock_to_agree_as_well_as_the_times():
    # trial times agree exactly (a bandwidth-bound kernel: its time does not follow the SM
    # clock) while the clock is still falling: not settled yet
    assert not _settled([1.0] * 3, [1980.0, 1800.0, 1620.0], SETTLE)
    assert not _settled([1.0] * 6, [1980.0, 1900.0, 1800.0, 1700.0, 1600.0, 1500.0], SETTLE)
    # the clock has stopped moving: settled
    assert _settled([1.0] * 3, [1500.0, 1500.0, 1501.0], SETTLE)
    # no clock readings at all (no telemetry): the times decide
    assert _settled([1.0] * 3, [None] * 3, SETTLE)


def test_settled_by_level_needs_the_clock_level_to_hold_too():
    # noisy times (3% apart) whose level holds across two groups of three trials, while the
    # clock level fell between the groups: not settled; once the clock holds, settled
    noisy = [1.0, 1.03, 0.99, 1.0, 1.03, 0.99]
    assert not _settled(noisy, [1980.0] * 3 + [1700.0] * 3, SETTLE)
    assert _settled(noisy, [1700.0] * 6, SETTLE)


def test_a_warm_up_near_the_power_cap_outlasts_the_power_window():
    """Softmax logits-4k (TileLang) on an H200 (2026-12-01) after a 0.5 s gap: power
    readings flat at 630 W of 700 while the clock held 1965 MHz; the clock fell at ~0.9 s
    of load. The times and clocks of those trials agree, so only the cap rule keeps
    warming up."""
    ends, powers, limits = [0.1, 0.2, 0.3], [632.0, 629.0, 630.0], [700.0] * 3
    assert _settled([863e-6, 862e-6, 863e-6], [1965.0, 1950.0, 1965.0], SETTLE, powers)
    assert _cap_wait_s(ends, powers, limits, 0.0, SETTLE) == pytest.approx(0.7)
    # the reading reaches the cap (>= 95%) at 1.1 s: warm up half a second past it
    ends, powers, limits = [*ends, 0.6, 1.1], [*powers, 650.0, 672.0], [700.0] * 5
    assert SETTLE.cap_settle_s == 0.5
    assert _cap_wait_s(ends, powers, limits, 0.0, SETTLE) == pytest.approx(0.5)
    assert _cap_wait_s([*ends, 1.4], [*powers, 690.0], [*limits, 700.0], 0.0,
                       SETTLE) == pytest.approx(0.2)
    assert _cap_wait_s([*ends, 1.6], [*powers, 690.0], [*limits, 700.0], 0.0, SETTLE) == 0.0


def test_no_warm_up_ends_before_the_power_reading_covers_its_load():
    """GEMM deepseek-v3.q_b_proj (TileLang bf16) at a commit of 2026-12-02 on an H200: the
    clock fell from 1965 to ~1670 MHz in the second trial while the averaged power
    readings, still rising, stayed under 85% of the limit. Times and clocks agreed and no
    power rule applied, so a 0.3 s minimum let the warm-up end at 0.47 s; the trials
    then reached the cap. The minimum is now the power reading's window."""
    ends, powers, limits = [0.11, 0.23, 0.35, 0.47], [543.0, 562.0, 573.0, 576.0], [700.0] * 4
    clocks = [1965.0, 1672.5, 1665.0, 1680.0]
    times = [550e-6, 578e-6, 582e-6, 581e-6]
    assert _settled(times, clocks, SETTLE, powers)
    assert _cap_wait_s(ends, powers, limits, 0.0, SETTLE) == 0.0
    assert ends[-1] < Plan().warmup_min_s and Plan().warmup_min_s >= Plan().power_window_s


def test_the_cap_rule_leaves_kernels_far_from_the_cap_and_unknown_limits_alone():
    # RMSNorm hidden on the same H200: 520-580 W of 700, its clock at 1980 MHz throughout
    assert _cap_wait_s([0.1, 0.2, 0.3], [526.0, 545.0, 581.0], [700.0] * 3, 0.0, SETTLE) == 0.0
    # no limit known (a backend without one) or no power: the other rules decide
    assert _cap_wait_s([0.1, 0.2], [690.0, 690.0], [None, None], 0.0, SETTLE) == 0.0
    assert _cap_wait_s([0.1, 0.2], [None, None], [700.0, 700.0], 0.0, SETTLE) == 0.0


def _measure_on_a_board(power_w: float, plan: Plan):
    """``measure`` of a 1 ms kernel on a board whose telemetry reads ``power_w`` of a 700 W
    limit at 1500 MHz (1 ms of host time per call too, for the sampler to see)."""

    from kperf.core.telemetry import Reading

    from .fakes import ScriptedSource

    gpu = FakeGpu()

    def kernel() -> None:
        time.sleep(0.001)
        gpu.run_cycles(1500e6 * 1e-3)

    class Board(ScriptedSource):
        def read(self) -> Reading:
            return Reading(t=time.perf_counter(), sm_clock_mhz=1500.0, power_w=power_w,
                           power_limit_w=700.0, throttle_bits=0)

    return measure([kernel], gpu, plan, Board(gpu, host_to_device=lambda t: t),
                   sampler_period_s=0.005)


@pytest.mark.parametrize(("power_w", "waits"), [(650.0, True), (400.0, False)])
def test_measure_holds_the_warm_up_while_power_is_near_the_cap(power_w: float,
                                                               waits: bool) -> None:
    """Through ``measure`` itself: times and clocks agree from the first trial, yet at 650 W
    of 700 the warm-up lasts the power window; at 400 W it ends as soon as they agree."""
    plan = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.0, warmup_max_s=2.0,
                power_window_s=0.3, cap_settle_s=0.1, energy_s=0)
    m = _measure_on_a_board(power_w, plan)
    assert m.settled
    assert (m.warmup_s >= 0.3) is waits, m.warmup_s


def test_measure_warms_up_for_the_power_window_whatever_the_readings_say():
    """Times, clocks and power agree from the first trial at 560 W of 700: the default
    warm-up still lasts the power window, for the reading to cover the kernel's load."""
    plan = Plan(trials=2, min_trial_s=0.02, warmup_max_s=3.0, energy_s=0)
    m = _measure_on_a_board(560.0, plan)
    assert m.settled and plan.power_window_s <= m.warmup_s < 1.5, m.warmup_s


def test_at_the_cap_a_level_that_holds_is_settled_though_clocks_swing():
    """At the power cap the controller swings the clock (1515-1965 MHz, H200, 2026-12-01) in a
    cycle longer than a trial: trials never agree within 1%, yet the level holds."""
    swinging = [1965.0, 1515.0, 1800.0, 1600.0, 1900.0, 1530.0]
    holding = [1.00, 1.03, 0.99, 0.99, 1.03, 1.008]  # medians 1.000, 1.008
    assert not _settled(holding, swinging, SETTLE)  # the rules off the cap never agree
    assert _settled(holding, swinging, SETTLE, at_cap=True)
    assert not _settled(holding[:5], swinging[:5], SETTLE, at_cap=True)  # two groups needed
    falling = [1.00, 1.01, 0.99, 1.04, 1.05, 1.03]  # the level still moving (+4%)
    assert not _settled(falling, swinging, SETTLE, at_cap=True)


@pytest.mark.parametrize(("power_w", "at_cap"), [(690.0, True), (600.0, False)])
def test_a_measurement_at_the_power_cap_takes_trials_at_cap(power_w: float, at_cap: bool) -> None:
    plan = Plan(trials=2, trials_at_cap=5, min_trial_s=0.02, warmup_min_s=0.0,
                warmup_max_s=2.0, power_window_s=0.1, cap_settle_s=0.1, energy_s=0)
    m = _measure_on_a_board(power_w, plan)
    assert m.settled and m.at_cap is at_cap
    assert len(m.samples) == len(m.windows) == (5 if at_cap else 2)


def test_energy_bursts_each_keep_their_energy_counter_updates_and_the_boards_state():
    # A counter update is seen when the sampler's poll sees it: a poll late by d moves a
    # burst's power by about d over the counter's span. Bursts of 0.15 s on a counter of
    # 20 ms read 5.4% low beside another run's main job and gate (load average 5-7,
    # 2026-12-06); spans of ~0.45 s keep a 20 ms late poll within the 5% asked here.
    plan = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.0, warmup_max_s=1.0,
                energy_s=0.5, energy_bursts=3)
    m = measure_on_a_counter(0.05, plan)
    burst = m.energy_burst
    per_call = burst["energy_per_call_j"]
    assert burst["bursts"] == len(per_call) == len(burst["per_burst"]) == 3
    assert m.energy_per_call_j == statistics.median(per_call)
    for e, b in zip(per_call, burst["per_burst"], strict=True):
        assert e == pytest.approx(300.0 * 1e-3, rel=0.05)  # 300 W x 1 ms of device time
        assert b["power_from"] == "energy counter" and b["counter_updates"] >= 5
        assert 0 < b["counter_span_s"] <= b["span_s"] and "t0" not in b
        # the counter's stream, for replaying shorter bursts (tools/lab/burst_replay.py)
        stream = b["updates"]
        assert len(stream) == b["counter_updates"] and stream[0][1] == 0.0
        assert all(0 <= t <= b["span_s"] + 0.01 for t, _ in stream)
        assert [t for t, _ in stream] == sorted(t for t, _ in stream)
        assert burst_energy(b, None, b["span_s"] + 1.0) == pytest.approx(e, rel=1e-4)  # to the us
    assert burst["counter_updates"] == sum(b["counter_updates"] for b in burst["per_burst"])
    assert burst["spread"] == pytest.approx((max(per_call) - min(per_call)) / statistics.median(
        per_call)) and burst["spread"] < 0.1
    assert burst["power_w_before"] == 300.0
    assert burst["temperature_c_start"] < burst["temperature_c_before"]  # the board warmed


def test_a_burst_the_counter_does_not_move_in_twice_takes_the_power_readings():
    plan = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.0, warmup_max_s=1.0,
                energy_s=0.05, energy_bursts=1)
    m = measure_on_a_counter(10.0, plan)
    (b,) = m.energy_burst["per_burst"]
    assert b["power_from"] == "power readings" and b["counter_updates"] <= 1
    assert m.energy_burst["spread"] is None  # one burst: no spread of its own
    assert m.energy_per_call_j == pytest.approx(300.0 * 1e-3, rel=0.01)
