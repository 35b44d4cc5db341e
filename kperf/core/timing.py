"""Device-event timing of one kernel case, in the manner of nvbench's measurement loop.

One *trial* is one asv sample: ``reps`` timed executions whose per-call median is the
sample's value. Trials are long enough (``min_trial_s``) for a telemetry window to hold
fresh clock readings. Before the trials, warm-up runs until trial values and clocks
have settled. Two ways to time an execution:

- ``events``: L2 flush, start event, one call, end event. For calls of >= ~20 us,
  where launch latency is hidden behind the queued flush.
- ``graph``: a CUDA/HIP graph of ``calls_per_rep`` calls over rotating inputs, timed by
  events around each replay. For short kernels, where a launch costs more than the work.

Host timers are used only to bound the loop and to place telemetry windows, never as
the measured quantity; and, as a diagnostic beside each trial, to say how far the host
was ahead of the GPU when it had queued the trial's last rep (kperf/core/reps.py, which
also says when each rep is held behind a spin kernel).

The parts: the settings (kperf/core/plan.py), the reps (kperf/core/reps.py), the warm-up
(kperf/core/warmup.py), adaptive trials' stopping rule (kperf/core/trials.py) and the energy
bursts after the trials (kperf/core/energy.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kperf.core.device import Device
from kperf.core.energy import energy_bursts, energy_figures
from kperf.core.plan import Plan
from kperf.core.reps import Runner, trial_reps
from kperf.core.telemetry import NullSource, Sampler, Source, WindowStats
from kperf.core.telemetry.processes import ProcessWatch
from kperf.core.trials import median_rel_half_width, trials_stop
from kperf.core.warmup import warm_up


@dataclass
class Measurement:
    samples: list[float]  # seconds per call, one per trial
    number: int  # calls behind each sample
    mode: str  # "events" | "graph"
    reps: int
    calls_per_rep: int
    estimate_s: float
    warmup_trials: int
    warmup_s: float
    settled: bool
    telemetry_backend: str
    telemetry_reason: str
    windows: list[WindowStats] = field(default_factory=list)
    telemetry_read_errors: int = 0
    trial_spans_s: list[float] = field(default_factory=list)
    energy_per_call_j: float | None = None
    # calls, spans, power and counter updates of the energy bursts, each burst's energy per
    # call and the board's state before them (``kperf.core.energy.energy_figures``)
    energy_burst: dict[str, Any] | None = None
    at_cap: bool = False  # the warm-up ended with the board's power at the cap (cap_fraction)
    reps_queued: list[float | None] = field(default_factory=list)  # per trial (kperf/core/reps.py)
    # host seconds to queue a rep (median of the probe; when the driver's queue is full,
    # as it is for a host far ahead, the host waits for the GPU and this reads its pace)
    host_rep_s: float | None = None
    rep_hold_s: float = 0.0  # the hold before each rep's start event (0: none; kperf/core/reps.py)
    # the hold the estimate's reps were queued behind: longer than ``Plan.lead_hold_s``
    # where the host was still queueing them when that one ended (``estimate_call_s``)
    estimate_hold_s: float = 0.0
    # trials taken again because the host fell behind in them and the hold grew
    # (``Plan.max_trial_retakes``)
    trials_retaken: int = 0
    # Events mode over several input sets (or placed copies): each set's median over the
    # trials' reps, in set order. A kernel whose time depends on where its inputs lie
    # shows it here while a trial's median hides it (docs/journal/2026-12-02.md, "Early afternoon of
    # 2026-12-02": a decode GEMM read 88 to ~101 us by placement).
    input_set_medians_s: list[float] = field(default_factory=list)
    # Each warm-up trial: end (s after the warm-up began), median seconds per call, SM
    # clock, board power (the averaged reading) and the energy counter's mean power since
    # the warm-up began. What settling took, case by case, from whole-suite runs.
    warmup_trace: list[dict[str, float | None]] = field(default_factory=list)
    warmup_cool: bool = False  # the warm-up ended by the cool rule (``Plan.cool_warmup_min_s``)
    # Why the trials ended (``trials_stop``): "fixed" (adaptive trials off), "precise"
    # (the median known to ``stop_rel_ci``), "max_trials" (not precise within the most),
    # "at_cap" (no early stop at the power cap). ``median_rel_half_width``: the 95%
    # interval's half-width over the median at the end (None: fewer than 2 trials).
    trials_stop: str = "fixed"
    median_rel_half_width: float | None = None
    # The other processes on the GPU in the trials' windows (looked for before the first
    # trial and after each; this process and its sibling workers left out), or why they
    # could not be known: ``kperf.core.telemetry.processes.ProcessWatch.summary``
    gpu_processes: dict[str, Any] | None = None

    def as_record(self) -> dict[str, Any]:
        rec = asdict(self)
        rec["windows"] = [w.as_dict() for w in self.windows]
        return rec



@dataclass
class _Trials:
    """The timed trials of a measurement, each with its telemetry window."""

    samples: list[float] = field(default_factory=list)
    windows: list[WindowStats] = field(default_factory=list)
    spans: list[float] = field(default_factory=list)
    queued: list[float | None] = field(default_factory=list)
    by_set: dict[int, list[float]] = field(default_factory=dict)  # input set -> its reps' s
    stop: str = "fixed"  # ``Measurement.trials_stop``
    retaken: int = 0  # ``Measurement.trials_retaken``
    last: tuple[float, float] = (0.0, 0.0)  # host times around the last trial

    def set_medians(self) -> list[float]:
        """``Measurement.input_set_medians_s``: each input set's median, with two or more."""
        by_set = self.by_set
        return [statistics.median(by_set[i]) for i in sorted(by_set)] if len(by_set) > 1 else []


def measure(
    calls: Sequence[Callable[[], Any]],
    device: Device,
    plan: Plan | None = None,
    source: Source | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sampler_period_s: float = 0.05,
) -> Measurement:
    """Time a kernel. ``calls`` are zero-argument launches over distinct input buffers."""
    plan = plan or Plan()
    source = source or NullSource("no telemetry source given")
    runner = Runner(device, calls, plan)
    estimate, host_rep_s, began = _choose_mode(runner, plan, clock)
    reps = trial_reps(estimate * runner.calls_per_rep + runner.hold_before_rep_s, plan)

    watch = ProcessWatch(source)
    with Sampler(source, period_s=sampler_period_s) as sampler:
        warm = warm_up(runner, reps, plan, sampler, clock, began)
        trials = _run_trials(runner, reps, plan, sampler, warm.at_cap, clock, watch)
        bursts = energy_bursts(runner, plan, sampler, statistics.median(trials.samples), clock)
        # readings trail the work by the source's lag: wait so the last window is filled
        if source.lag_s or bursts:
            _wait_for_reading_after(sampler, max([trials.last[1], *(b["t1"] for b in bursts)])
                                    + source.lag_s)
            trials.windows[-1] = sampler.window(*trials.last)
        energy_per_call, burst = energy_figures(bursts, sampler) if bursts else (None, None)

    return Measurement(
        samples=trials.samples,
        number=reps * runner.calls_per_rep,
        mode=runner.mode,
        reps=reps,
        calls_per_rep=runner.calls_per_rep,
        estimate_s=estimate,
        warmup_trials=warm.trials,
        warmup_s=warm.seconds,
        settled=warm.settled,
        at_cap=warm.at_cap,
        telemetry_backend=source.backend,
        telemetry_reason=source.reason,
        windows=trials.windows,
        telemetry_read_errors=sampler.errors,
        trial_spans_s=trials.spans,
        energy_per_call_j=energy_per_call,
        energy_burst=burst,
        reps_queued=trials.queued,
        input_set_medians_s=trials.set_medians(),
        host_rep_s=host_rep_s,
        estimate_hold_s=runner.estimate_hold_s,
        rep_hold_s=runner.hold_before_rep_s,
        warmup_trace=warm.trace,
        warmup_cool=warm.cool,
        trials_stop=trials.stop,
        trials_retaken=trials.retaken,
        median_rel_half_width=median_rel_half_width(trials.samples),
        gpu_processes=watch.summary(),
    )


def _choose_mode(runner: Runner, plan: Plan, clock: Callable[[], float]
                 ) -> tuple[float, float | None, float | None]:
    """(seconds per call, host seconds to queue a rep, when the host's probe began).

    Graph replay for calls shorter than ``graph_below_s``; otherwise events, after a
    trial's worth of reps has shown whether the host stays ahead (kperf/core/reps.py). That
    probe warms the kernel up too, so the warm-up counts from its start."""
    estimate = estimate_call_s(runner, plan)
    host_rep_s = runner.host_rep_s
    if estimate < plan.graph_below_s and runner.device.supports_graphs:
        per_replay = plan.graph_rep_s / max(estimate, 1e-9)
        runner.use_graph(int(min(plan.max_graph_calls, max(10, per_replay))))
        return statistics.median(runner.time_reps(3)), host_rep_s, None
    began = clock()
    runner.time_reps(trial_reps(estimate, plan))
    runner.hold_for_host()
    return estimate, runner.host_rep_s, began


def estimate_call_s(runner: Runner, plan: Plan) -> float:
    """Device seconds per call: the median of ``plan.estimate_calls`` reps queued behind a
    hold. Where the host was still queueing them when the hold ended, again behind a longer
    hold (``Plan.estimate_retakes``); ``runner.estimate_hold_s`` keeps the last one."""
    hold_s = plan.lead_hold_s
    times = runner.time_reps(plan.estimate_calls, lead_hold_s=hold_s)
    for _ in range(plan.estimate_retakes):
        if not runner.outlasted_lead_hold() or hold_s >= plan.max_lead_hold_s:
            break
        host_s = plan.host_margin * plan.estimate_calls * (runner.host_rep_s or 0.0)
        hold_s = min(plan.max_lead_hold_s, max(2 * hold_s, host_s))
        times = runner.time_reps(plan.estimate_calls, lead_hold_s=hold_s)
    runner.estimate_hold_s = hold_s
    return statistics.median(times)


def _run_trials(runner: Runner, reps: int, plan: Plan, sampler: Sampler, at_cap: bool,
                clock: Callable[[], float], watch: ProcessWatch | None = None) -> _Trials:
    """Trials of ``reps`` reps until ``trials_stop`` says "precise" or the plan's number
    (``trials_at_cap`` where the warm-up ended at the power cap) is taken. The GPU's other
    processes are looked for before the first trial and after each kept one (``watch``),
    outside the timed windows."""
    trials = plan.trials_at_cap if at_cap and plan.trials_at_cap else plan.trials
    out = _Trials(stop=trials_stop(plan, at_cap, []))
    if watch is not None:
        watch.begin()
    while len(out.samples) < trials and out.stop != "precise":
        t0 = clock()
        times = runner.time_reps(reps)
        t1 = clock()
        if out.retaken < plan.max_trial_retakes and runner.raise_hold_if_behind():
            out.retaken += 1
            continue
        out.samples.append(statistics.median(times))
        for input_set, seconds in zip(runner.last_sets, times, strict=False):
            out.by_set.setdefault(input_set, []).append(seconds)
        out.queued.append(runner.reps_queued)
        out.windows.append(sampler.window(t0, t1))
        out.spans.append(t1 - t0)
        out.last = (t0, t1)
        out.stop = trials_stop(plan, at_cap, out.samples)
        if watch is not None:
            watch.trial_ended(len(out.samples) - 1)
    return out


def _wait_for_reading_after(sampler: Sampler, t: float, limit_s: float = 0.5) -> None:
    deadline = time.perf_counter() + limit_s
    while sampler.last_reading_t() < t and time.perf_counter() < deadline:
        time.sleep(0.01)
