"""The measurement loop's logic on a simulated GPU: modes, warm-up, sample counts, clocks."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness import timing
from harness.reps import Runner, reps_queued
from harness.timing import Plan, measure
from harness.warmup import _cap_wait_s, _settled

from .fakes import FakeGpu, FakeKernel, measure_on_a_counter

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


def test_the_plan_says_whether_a_flush_writes_or_reads():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)
    measure([kernel], gpu, Plan(**FAST))
    assert gpu.flushes > 0 and gpu.flushes_by_reading == 0
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1500e6 * 200e-6)
    m = measure([kernel], gpu, Plan(**FAST).with_overrides(flush_by_reading=True))
    assert gpu.flushes_by_reading == gpu.flushes >= m.reps * 8


def test_each_trial_says_how_many_reps_the_host_had_queued_ahead():
    # the GPU's time per rep is span / reps; the host's wait in synchronize is the rest
    assert reps_queued(drained_s=0.040, span_s=0.100, reps=1000) == pytest.approx(400)
    assert reps_queued(drained_s=80e-6, span_s=0.100, reps=1000) == pytest.approx(0.8)
    assert reps_queued(drained_s=0.01, span_s=0.0, reps=10) is None
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 200e-6)], gpu, Plan(**FAST))
    assert len(m.reps_queued) == len(m.samples) == 8
    assert all(q is not None and q >= 0 for q in m.reps_queued)


def _slow_host_kernel(gpu: FakeGpu, host_s: float, kernel_s: float):
    """A launch that really costs the host ``host_s`` (the loop reads the host's time on
    its own clock) and the simulated host the same."""
    import time

    gpu.launch_overhead_s = host_s
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)

    def launch() -> None:
        until = time.perf_counter() + host_s
        while time.perf_counter() < until:
            pass
        kernel()

    return launch


def test_a_host_slower_than_the_flush_gets_a_hold_before_each_rep():
    """A 40 us kernel whose launch costs the host 100 us: behind a 50 us flush the GPU
    waits for each launch and the events read it. A trial's worth of reps shows the host
    falling behind; a hold before each start event, longer than the launch, leaves the
    kernel's own time."""
    gpu = FakeGpu()
    m = measure([_slow_host_kernel(gpu, 100e-6, 40e-6)], gpu, Plan(**FAST))
    assert m.mode == "events" and m.host_rep_s is not None and m.host_rep_s >= 100e-6
    assert m.rep_hold_s == pytest.approx(1.5 * m.host_rep_s)
    assert gpu.holds.count(m.rep_hold_s) >= m.reps * len(m.samples)
    for s in m.samples:
        assert s == pytest.approx(40e-6, rel=1e-6)

    gpu = FakeGpu()  # a hold that ends at 60% of what it was asked (it spins clock
    # cycles, counted at a lower clock than the one it runs at)
    real_hold = gpu.hold
    gpu.hold = lambda seconds: real_hold(0.6 * seconds)
    m = measure([_slow_host_kernel(gpu, 100e-6, 40e-6)], gpu, Plan(**FAST))
    assert m.rep_hold_s == pytest.approx(1.5 * m.host_rep_s / 0.6)
    for s in m.samples:
        assert s == pytest.approx(40e-6, rel=1e-6)

    gpu = FakeGpu()  # the same without the rule: the launches leak into the samples
    m = measure([_slow_host_kernel(gpu, 100e-6, 40e-6)], gpu, Plan(**FAST, host_ahead_reps=0))
    assert m.rep_hold_s == 0.0
    assert statistics.median(m.samples) > 1.2 * 40e-6
    assert max(m.reps_queued) < 1.5  # what the trials record when the host is behind


def test_a_host_that_keeps_ahead_gets_no_hold_however_close_its_pace():
    """A 70 us kernel behind a 50 us flush whose launch costs the host 100 us: the host
    gains 20 us a rep and stays ahead, so the events read the kernel without a hold. A
    hold there would only idle the GPU between reps: on an H200 such holds, given by the
    host's time alone, halved a 70 us RMSNorm's board power and moved its time by up to
    1% (2026-12-02, docs/journal/2026-12-02.md "A hold given where none was needed")."""
    gpu = FakeGpu()
    m = measure([_slow_host_kernel(gpu, 100e-6, 70e-6)], gpu, Plan(**{**FAST, "min_trial_s": 0.02}))
    assert m.host_rep_s is not None and 1.5 * m.host_rep_s > 120e-6  # the old rule's hold
    assert m.rep_hold_s == 0.0 and gpu.holds == [Plan().lead_hold_s]
    assert min(m.reps_queued) > 8
    for s in m.samples:
        assert s == pytest.approx(70e-6, rel=1e-6)


def test_a_hold_floor_holds_every_flushed_rep_whatever_the_hosts_pace():
    """``rep_hold_min_s``: a host that keeps ahead gets the floor before every rep, a host
    behind gets the longer of its own hold and the floor, graph replay none (no flush)."""
    floor = 20e-6
    plan = Plan(**{**FAST, "min_trial_s": 0.02, "rep_hold_min_s": floor})
    gpu = FakeGpu()
    m = measure([_slow_host_kernel(gpu, 100e-6, 70e-6)], gpu, plan)
    assert m.rep_hold_s == floor and gpu.holds.count(floor) >= m.reps * len(m.samples)
    assert all(s == pytest.approx(70e-6, rel=1e-6) for s in m.samples)
    gpu = FakeGpu()  # 150 us of host a rep against 50 + 20 + 40 us of GPU: still behind
    m = measure([_slow_host_kernel(gpu, 150e-6, 40e-6)], gpu, plan)
    assert m.rep_hold_s == pytest.approx(1.5 * m.host_rep_s) and m.rep_hold_s > floor
    assert all(s == pytest.approx(40e-6, rel=1e-6) for s in m.samples)
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 5e-6)], gpu, plan)
    assert m.mode == "graph" and m.rep_hold_s == 0.0
    assert gpu.holds.count(floor) == plan.estimate_calls  # the estimate's, before the choice


def test_a_host_that_keeps_ahead_gets_no_hold():
    gpu = FakeGpu()
    m = measure([FakeKernel(gpu, cycles=1500e6 * 200e-6)], gpu, Plan(**FAST))
    assert m.rep_hold_s == 0.0 and m.host_rep_s is not None and m.host_rep_s < 100e-6
    assert gpu.holds == [Plan().lead_hold_s]  # the estimate's, nothing per rep


def _host_slowing_in_the_trials(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch, host_s: float,
                                slow_s: float, kernel_s: float, after_trials: int
                                ) -> Callable[[], None]:
    """A launch like ``_slow_host_kernel``'s that costs the host ``host_s`` until
    ``after_trials`` timed trials have run and ``slow_s`` from then on: a host that keeps
    ahead through the probe and the warm-up and falls behind mid-measurement."""
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)
    slow_from = math.inf  # the first slow call, once the trials' reps are known
    run_trials = timing._run_trials

    def trials_then_slow(runner: Runner, reps: int, *rest: Any) -> Any:
        nonlocal slow_from
        slow_from = kernel.calls + after_trials * reps
        return run_trials(runner, reps, *rest)

    monkeypatch.setattr(timing, "_run_trials", trials_then_slow)

    def launch() -> None:
        gpu.launch_overhead_s = slow_s if kernel.calls >= slow_from else host_s
        until = time.perf_counter() + gpu.launch_overhead_s
        while time.perf_counter() < until:
            pass
        kernel()

    return launch


# a 10 us floor, shorter than a host of 150 us a launch needs behind a 50 us flush
RETAKE = dict(FAST, min_trial_s=0.02, energy_s=0, rep_hold_min_s=10e-6)


def test_a_trial_the_host_fell_behind_in_is_taken_again_behind_a_longer_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 70 us kernel whose launch costs the host 100 us, behind a flush and a 10 us floor:
    the host keeps ahead through the probe, then slows to 150 us a launch from the third
    trial on and the GPU waits for each launch, so that trial would read 150 - 50 - 10 =
    90 us (a floor shorter than the host needs: Triton RMSNorm trials of up to 114 us among
    69.7 us ones, H200 GPU-fd64c0f9, 2026-12-04). It is taken again behind the hold the
    host now needs, and every sample reads the kernel."""
    gpu = FakeGpu()
    launch = _host_slowing_in_the_trials(gpu, monkeypatch, 100e-6, 150e-6, 70e-6, 2)
    plan = Plan(**RETAKE)
    m = measure([launch], gpu, plan)
    assert m.host_rep_s is not None and m.host_rep_s < 150e-6  # the probe's host: ahead
    assert m.trials_retaken == 1 and m.as_record()["trials_retaken"] == 1
    assert m.rep_hold_s >= 1.5 * 150e-6 > plan.rep_hold_min_s
    assert gpu.holds.count(m.rep_hold_s) >= m.reps * (plan.trials - 2)
    assert len(m.samples) == plan.trials
    assert max(m.samples) == pytest.approx(70e-6, rel=1e-6)
    assert statistics.median(m.samples) == pytest.approx(70e-6, rel=1e-6)


def test_without_retakes_the_trials_the_host_fell_behind_in_are_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same host with ``max_trial_retakes=0``: the hold stays at the floor and the
    trials from the third on read the host's launches, 90 us, not the kernel's 70 us."""
    gpu = FakeGpu()
    launch = _host_slowing_in_the_trials(gpu, monkeypatch, 100e-6, 150e-6, 70e-6, 2)
    plan = Plan(**RETAKE, max_trial_retakes=0)
    m = measure([launch], gpu, plan)
    assert m.trials_retaken == 0 and m.rep_hold_s == plan.rep_hold_min_s
    assert m.samples[:2] == pytest.approx([70e-6] * 2, rel=1e-6)
    assert m.samples[2:] == pytest.approx([90e-6] * (plan.trials - 2), rel=1e-6)
    assert max(m.reps_queued[2:]) < 1.5  # the host behind in each of them


def _host_ever_slower(gpu: FakeGpu, kernel_s: float, step_s: float) -> Callable[[], None]:
    """A host that never keeps up and slows with every launch: each launch costs the
    simulated host 5 ms, more than a flush, the longest hold and the kernel take the GPU,
    and on the real clock, which the loop reads the host's pace by, 20 us plus ``step_s``
    for each launch before it, so every trial asks for a longer hold than the last."""
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)
    gpu.launch_overhead_s = 5e-3

    def launch() -> None:
        until = time.perf_counter() + 20e-6 + step_s * kernel.calls
        while time.perf_counter() < until:
            pass
        kernel()

    return launch


@pytest.mark.parametrize("retakes", [1, 3])
def test_retakes_stop_at_max_trial_retakes_for_a_host_that_never_keeps_up(retakes: int) -> None:
    """Every trial ends with the host behind and gets a longer hold (short of
    ``max_rep_hold_s``), yet only ``max_trial_retakes`` trials are taken again and the
    measurement still returns its trials."""
    gpu = FakeGpu()
    plan = Plan(**FAST, energy_s=0, max_trial_retakes=retakes)
    m = measure([_host_ever_slower(gpu, 70e-6, 5e-6)], gpu, plan)
    assert m.trials_retaken == retakes and len(m.samples) == plan.trials
    assert max(m.reps_queued) < 1.5
    assert 0 < m.rep_hold_s < plan.max_rep_hold_s  # the ceiling did not end the retakes


def test_a_host_behind_at_the_longest_hold_is_not_taken_again() -> None:
    """A 40 us kernel whose launch costs the host 150 us, holds capped at 30 us: every
    trial ends with the host behind, but the probe's hold is already the longest, so no
    trial is taken again; the trials read 150 - 50 - 30 = 70 us."""
    gpu = FakeGpu()
    plan = Plan(**FAST, energy_s=0, max_rep_hold_s=30e-6)
    m = measure([_slow_host_kernel(gpu, 150e-6, 40e-6)], gpu, plan)
    assert m.rep_hold_s == plan.max_rep_hold_s and max(m.reps_queued) < 1.5
    assert m.trials_retaken == 0 and len(m.samples) == plan.trials
    assert all(s == pytest.approx(70e-6, rel=1e-6) for s in m.samples)


def test_a_host_that_stays_ahead_never_takes_a_trial_again() -> None:
    """No retake where the host keeps ahead in every trial: a fast host without a hold, a
    host of 100 us behind a 20 us floor and a 70 us kernel, and one that fell behind in
    the probe and keeps ahead behind the hold it gave."""
    ahead = dict(FAST, min_trial_s=0.02, energy_s=0)
    for host_s, kernel_s, floor, probe_held in ((None, 200e-6, 0.0, False),
                                                (100e-6, 70e-6, 20e-6, False),
                                                (100e-6, 40e-6, 0.0, True)):
        gpu = FakeGpu()
        launch = (FakeKernel(gpu, cycles=1500e6 * kernel_s) if host_s is None
                  else _slow_host_kernel(gpu, host_s, kernel_s))
        plan = Plan(**ahead, rep_hold_min_s=floor)
        m = measure([launch], gpu, plan)
        assert m.trials_retaken == 0 and len(m.samples) == plan.trials, (host_s, kernel_s)
        assert (m.rep_hold_s > floor) is probe_held
        assert min(m.reps_queued) > plan.host_ahead_reps
        assert all(s == pytest.approx(kernel_s, rel=1e-6) for s in m.samples)


def test_the_estimate_is_the_kernels_time_not_the_hosts():
    """A 12 us kernel whose launch costs the host 40 us read 42-75 us by events behind a
    flush (H200, 2026-12-02): above graph_below_s, so it was timed by events, where the
    host's latency leaked in. Queued behind a hold, the estimate reads the kernel, and the
    kernel is timed by graph replay."""
    gpu = FakeGpu()
    m = measure([_slow_host_kernel(gpu, 40e-6, 12e-6)], gpu, Plan(**FAST))
    assert m.estimate_s < Plan().graph_below_s and m.mode == "graph"
    assert statistics.median(m.samples) == pytest.approx(12e-6, rel=0.05)


def test_the_energy_burst_of_a_slow_host_replays_a_graph():
    """Back-to-back calls the host cannot launch as fast as the GPU runs them would count
    the GPU's idle gaps as the calls' time (and energy): the burst replays a graph."""
    from harness.reps import Runner

    gpu = FakeGpu()
    runner = Runner(gpu, [_slow_host_kernel(gpu, 100e-6, 40e-6)], Plan(**FAST))
    runner.time_reps(50)
    runner.hold_for_host()
    assert runner.rep_hold_s > 0
    graphs = gpu.graphs
    seconds, calls = runner.burst(200)
    assert seconds / calls == pytest.approx(40e-6, rel=1e-6) and 100 <= calls <= 200
    assert gpu.graphs == graphs + 1
    def refuse(calls):
        raise RuntimeError("operation not permitted when stream is capturing")

    gpu.capture = refuse  # a call that cannot be captured: launched one by one
    seconds, calls = runner.burst(200)
    assert calls == 200 and seconds / calls > 90e-6
    runner.rep_hold_s = 0.0  # launched one by one, the host's 100 us a call shows
    seconds, calls = runner.burst(200)
    assert calls == 200 and seconds / calls > 90e-6


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
    import time

    from harness.telemetry import Reading

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
    plan = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.0, warmup_max_s=1.0,
                energy_s=0.15, energy_bursts=3)
    m = measure_on_a_counter(0.02, plan)
    burst = m.energy_burst
    per_call = burst["energy_per_call_j"]
    assert burst["bursts"] == len(per_call) == len(burst["per_burst"]) == 3
    assert m.energy_per_call_j == statistics.median(per_call)
    for e, b in zip(per_call, burst["per_burst"], strict=True):
        assert e == pytest.approx(300.0 * 1e-3, rel=0.05)  # 300 W x 1 ms of device time
        assert b["power_from"] == "energy counter" and b["counter_updates"] >= 5
        assert 0 < b["counter_span_s"] <= b["span_s"] and "t0" not in b
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
