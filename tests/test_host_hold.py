"""The hold before each rep on a simulated GPU: a host that falls behind the GPU gets one,
a floor holds every rep, and a trial the host fell behind in is taken again."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from kperf.core import reps, timing
from kperf.core.reps import Runner, reps_queued
from kperf.core.timing import Plan, measure

from .fakes import FAST, FakeGpu, FakeKernel


class HostClock:
    """The clock ``kperf.core.reps`` reads the host's pace by (``time.perf_counter``), here
    the simulated host's: a launch spends what it costs the host, a synchronize waits for
    the GPU work still queued, and nothing else moves it. On the real clock (busy waits)
    every other process of a loaded machine slowed this host: a launch of 100 us read more
    now and then, and holds and retakes followed it (issue 45, 2026-12-06)."""

    def __init__(self) -> None:
        self.t = 0.0

    def perf_counter(self) -> float:
        return self.t

    def spend(self, seconds: float) -> None:
        self.t += seconds


HOST = HostClock()


@pytest.fixture(autouse=True)
def _host_on_its_own_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    HOST.t = 0.0
    monkeypatch.setattr(reps, "time", HOST)

    def synchronize(gpu: FakeGpu) -> None:
        HOST.spend(max(0.0, gpu.now - gpu.host))
        gpu.host = gpu.now = max(gpu.now, gpu.host)

    monkeypatch.setattr(FakeGpu, "synchronize", synchronize)


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
    """A launch that costs the host ``host_s``: on the clock the loop reads the host's
    time by (``HOST``) and on the fake GPU's host axis alike."""
    gpu.launch_overhead_s = host_s
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)

    def launch() -> None:
        HOST.spend(host_s)
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
        HOST.spend(gpu.launch_overhead_s)
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
    and on the clock the loop reads the host's pace by (``HOST``) 20 us plus ``step_s``
    for each launch before it, so every trial asks for a longer hold than the last."""
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)
    gpu.launch_overhead_s = 5e-3

    def launch() -> None:
        HOST.spend(20e-6 + step_s * kernel.calls)
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


def _host_slow_outside_graphs(gpu: FakeGpu, host_s: float, kernel_s: float
                              ) -> Callable[[], None]:
    """A launch that costs the host ``host_s`` (on ``HOST`` and the fake GPU's host axis)
    one by one and nothing inside a graph replay, where the driver launches the calls."""
    gpu.launch_overhead_s = host_s
    kernel = FakeKernel(gpu, cycles=1500e6 * kernel_s)

    def launch() -> None:
        HOST.spend(0.0 if gpu.in_graph else host_s)
        kernel()

    return launch


def test_an_estimate_the_host_outlasted_its_hold_in_is_taken_again_behind_a_longer_one():
    """A 10 us kernel whose launch costs the host 500 us: five estimate reps take the host
    2.5 ms, the 1 ms hold ends while it queues the third, and the GPU waits for the later
    launches, so the estimate (their median) reads 340 us, over graph_below_s: the kernel
    would be timed by events. On an H200 a 10.8 us LayerNorm read 192 us so, was timed by
    events at 15.9 us instead of graph replay at 10.8 us, and stepped x1.467 between two
    runs of one commit (vm-nvidia-h200-eb9ed144, 2026-12-04). Taken again behind a hold
    longer than the host needs, the estimate reads the kernel, which is replayed."""
    gpu = FakeGpu()
    plan = Plan(**FAST, energy_s=0)
    m = measure([_host_slow_outside_graphs(gpu, 500e-6, 10e-6)], gpu, plan)
    assert m.estimate_s == pytest.approx(10e-6, rel=1e-6) and m.mode == "graph"
    assert m.estimate_hold_s >= 5 * 500e-6 > plan.lead_hold_s
    assert gpu.holds[:2] == [plan.lead_hold_s, m.estimate_hold_s]
    assert m.as_record()["estimate_hold_s"] == m.estimate_hold_s
    assert statistics.median(m.samples) == pytest.approx(10e-6, rel=1e-6)

    gpu = FakeGpu()  # without retakes: the host's launches choose events
    m = measure([_host_slow_outside_graphs(gpu, 500e-6, 10e-6)], gpu,
                Plan(**FAST, energy_s=0, estimate_retakes=0))
    assert m.estimate_s > plan.graph_below_s and m.mode == "events"
    assert m.estimate_hold_s == plan.lead_hold_s

    gpu = FakeGpu()  # a host that outlasts even the longest hold: the estimate stops there
    short = Plan(**FAST, energy_s=0, max_lead_hold_s=1.2e-3)
    m = measure([_host_slow_outside_graphs(gpu, 500e-6, 10e-6)], gpu, short)
    assert gpu.holds[:2] == [short.lead_hold_s, short.max_lead_hold_s]
    assert m.estimate_hold_s == short.max_lead_hold_s and m.mode == "events"


def test_the_energy_burst_of_a_slow_host_replays_a_graph():
    """Back-to-back calls the host cannot launch as fast as the GPU runs them would count
    the GPU's idle gaps as the calls' time (and energy): the burst replays a graph."""
    from kperf.core.reps import Runner

    gpu = FakeGpu()
    runner = Runner(gpu, [_slow_host_kernel(gpu, 100e-6, 40e-6)], Plan(**FAST))
    runner.time_reps(50)
    runner.hold_for_host()
    assert runner.rep_hold_s > 0
    graphs = gpu.graphs
    for _ in range(2):  # captured once, replayed by every burst
        seconds, calls = runner.burst(200)
        assert seconds / calls == pytest.approx(40e-6, rel=1e-6) and 100 <= calls <= 200
    assert gpu.graphs == graphs + 1
    runner.rep_hold_s = 0.0  # launched one by one, the host's 100 us a call shows
    seconds, calls = runner.burst(200)
    assert calls == 200 and seconds / calls > 90e-6

    def refuse(calls):
        raise RuntimeError("operation not permitted when stream is capturing")

    gpu = FakeGpu()
    runner = Runner(gpu, [_slow_host_kernel(gpu, 100e-6, 40e-6)], Plan(**FAST))
    runner.time_reps(50)
    runner.hold_for_host()
    gpu.capture = refuse  # a call that cannot be captured: launched one by one
    for _ in range(2):
        seconds, calls = runner.burst(200)
        assert calls == 200 and seconds / calls > 90e-6 and not runner.last_burst_by_graph


def test_a_hold_never_shrinks_within_a_measurement() -> None:
    """A host found behind again, now at a quicker pace, keeps the longer hold it had: the
    trials before and after are held alike."""
    gpu = FakeGpu()
    runner = Runner(gpu, [FakeKernel(gpu, cycles=1500e6 * 70e-6)], Plan(**FAST))
    runner.time_reps(20)
    runner.rep_hold_s, runner.reps_queued, runner.host_rep_s = 300e-6, 0.5, 100e-6
    assert not runner.raise_hold_if_behind()
    assert runner.rep_hold_s == 300e-6
    runner.host_rep_s = 400e-6  # slower still: the hold grows
    assert runner.raise_hold_if_behind() and runner.rep_hold_s > 300e-6


class _EnergySampler:
    """What ``energy_bursts`` asks of a sampler: that it reads energy, and a faster poll."""

    def has_energy(self) -> bool:
        return True

    def polling_every(self, period_s: float) -> Any:
        import contextlib

        return contextlib.nullcontext()


def test_a_burst_the_host_left_gaps_in_is_dropped_and_the_bursts_replay_a_graph():
    """Trials held by a class's floor never show the host behind, so its hold is not
    raised; back to back it cannot keep up (100 us to launch a 40 us call). The first
    burst, launched call by call, had gaps: it is dropped and the bursts replay a graph."""
    from kperf.core.energy import energy_bursts

    plan = Plan(**FAST, energy_s=0.004, energy_bursts=3)
    gpu = FakeGpu()
    runner = Runner(gpu, [_slow_host_kernel(gpu, 100e-6, 40e-6)], plan)
    captured_at: list[float] = []
    capture = gpu.capture

    def timed_capture(calls):
        captured_at.append(time.perf_counter())
        return capture(calls)

    gpu.capture = timed_capture
    bursts = energy_bursts(runner, plan, _EnergySampler(), 40e-6, time.perf_counter)
    assert runner.rep_hold_s == 0 and len(bursts) == 3 and gpu.graphs == 1
    assert all(b["by_graph"] and b["device_s"] / b["calls"] == pytest.approx(40e-6, rel=1e-6)
               for b in bursts)
    assert bursts[0]["dropped_gapped_s_per_call"] > 2 * 40e-6  # the host's pace, not the GPU's
    # the GPU idles while the host captures: outside every burst's window of power readings
    assert len(captured_at) == 1 and captured_at[0] < bursts[0]["t0"]

    gpu = FakeGpu()  # a host that keeps up: launched call by call, nothing dropped
    runner = Runner(gpu, [_slow_host_kernel(gpu, 10e-6, 40e-6)], plan)
    bursts = energy_bursts(runner, plan, _EnergySampler(), 40e-6, time.perf_counter)
    assert len(bursts) == 3 and gpu.graphs == 0
    assert not any(b["by_graph"] or b["dropped_gapped_s_per_call"] for b in bursts)
