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
was ahead of the GPU when it had queued the trial's last rep (``reps_queued``). A host
that keeps ahead leaves many reps queued; about one means the GPU waited for the host,
and then the events' intervals can hold the host's launch latency too.

So the estimate is taken behind a hold (a spin kernel the host queues its reps behind).
In ``events`` mode a trial's worth of reps first shows whether the host stays ahead; if
it ends fewer than ``host_ahead_reps`` reps ahead, every rep gets a hold of its own
before the start event, longer than the host needs to queue the call behind it
(``rep_hold_s``). A 12 us SwiGLU read 11.7 us in one run and 17-20 us in another
without either (H200, 2026-12-02, docs/journal/2026-12-02.md). The hold is given only where the host
was seen to fall behind: a hold idles the GPU between reps, which lowers the board's
power, and a bandwidth-bound kernel's time moves with it (H200, 2026-12-02,
docs/journal/2026-12-02.md "A hold given where none was needed").
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.device import Device
from harness.telemetry import NullSource, Sampler, Source, WindowStats


@dataclass(frozen=True)
class Plan:
    trials: int = 10  # samples of one measurement (an asv sample each; a gate block: fewer)
    # ... when the warm-up ended at the power cap (0: ``trials``). There the power
    # controller swings the clock in a cycle of ~0.5-1 s, so a trial of 100 ms reads one
    # phase of it and trials spread 1-3% (H200, 2026-12-01, docs/journal/2026-12-01.md "Late
    # evening"): more trials cover whole cycles.
    trials_at_cap: int = 0
    min_trial_s: float = 0.1  # NVML refreshes every ~100 ms: shorter windows hold stale clocks
    min_reps: int = 10
    max_reps: int = 2000
    graph_below_s: float = 20e-6  # calls shorter than this are timed by graph replay
    graph_rep_s: float = 1e-3  # target device time of one graph replay
    max_graph_calls: int = 500  # large graphs are fragile on ROCm (tritonbench#1034)
    flush_l2: bool = True
    # No warm-up ends before the board's power reading (NVML's: a ~1 s average) covers the
    # kernel's own load: until then neither the power rules below nor the clock can tell
    # whether it will reach the cap. With 0.3 s, 56 of 253 warm-ups of one H200 session
    # (2026-12-02, docs/journal/2026-12-02.md "Morning of 2026-12-02") ended under the cap within
    # 1 s and their trials then reached it (14 capped GEMMs read 1.7% fast, median); 1 s
    # would have cost those records 0.14 s a measurement.
    warmup_min_s: float = 1.0
    # 252 of 253 warm-ups of an H200 session (0.3 s minimum) settled, in 1.63 s (median;
    # p90 1.83 s, longest 3.77 s; 2026-12-02, docs/journal/2026-12-02.md "Morning of 2026-12-02")
    warmup_max_s: float = 5.0
    settle_trials: int = 3  # consecutive warm-up trials that must agree
    settle_tol: float = 0.01  # relative spread of those trials (time and clock)
    # ... and of their board power: NVML's is a ~1 s average, and a power-capped kernel's
    # clock dips once that average reaches the cap, ~1 s after a change of load
    # (docs/journal/2026-12-01.md, "Warm-up at the power cap")
    settle_power_tol: float = 0.03
    # Near the board's power limit the clock is cut only once the power controller has
    # seen a full averaging window of the load: after a gap of half a second a kernel at
    # the cap ran ~0.8 s at 1965 MHz, its power reading flat below the cap, before its
    # clock fell to ~1400 MHz (H200, 2026-12-01, docs/journal/2026-12-01.md "Warm-up at the power
    # cap"). So a warm-up whose board power reaches cap_near_fraction of the limit runs at least
    # power_window_s, and one that reaches cap_fraction runs cap_settle_s past that. The
    # first reading at the cap comes right after the controller's first deep dip; from
    # there the clock cycles about a steady level. Over 93 capped GEMM warm-ups (H200,
    # 2026-12-02, docs/journal/2026-12-02.md "Capped warm-up"), stopping 0.5 s past it instead of
    # 1 s moved the median of the next ten trials by 0.47% (median; signed mean -0.01%), less
    # than two runs of the same case differ (0.63%), and saved 0.98 s a capped case.
    cap_near_fraction: float = 0.85
    cap_fraction: float = 0.95
    power_window_s: float = 1.0
    cap_settle_s: float = 0.5
    estimate_calls: int = 5
    # A hold the host queues a batch behind (the estimate's reps, reps without a flush,
    # the energy burst), so launch latency does not leak into its first intervals
    lead_hold_s: float = 1e-3
    # A trial's worth of reps that ends with fewer reps still queued than this gets a hold
    # in every rep. The host either keeps ahead, up to the driver's queue (200-256 reps
    # on an H200), or falls behind (about one): of 77 measurements by events without a
    # hold on an H200, none ended a trial fewer than 79 reps ahead (2026-12-02,
    # docs/journal/2026-12-02.md "A hold given where none was needed"). 0 turns holds off.
    host_ahead_reps: float = 8.0
    host_margin: float = 1.5  # a hold: this times the host's time to queue a rep
    max_rep_hold_s: float = 2e-3
    # Energy per call: after the trials, calls back to back (no flush; graph replay in
    # graph mode) for this long; their mean power, from the energy counter's updates,
    # times their device time per call (0 turns it off).
    energy_s: float = 0.4
    # ... this many bursts back to back; the figure is the median of their energies per
    # call and the record keeps each, so their spread shows (all H200 figures so far: 1)
    energy_bursts: int = 1
    # Adaptive trials (0 turns them off: every measurement takes ``trials``). After each
    # trial from ``min_trials`` on, sampling stops once the 95% interval of the trials'
    # median is within ``stop_rel_ci`` of it (``median_rel_half_width``); ``trials`` is
    # the most it takes. Not at the power cap: there trials follow the power controller's
    # ~1 s clock cycle, so a few of them agree within one phase of it and their interval
    # says nothing of the others (docs/journal/2026-12-01.md "Late evening of 2026-12-01").
    stop_rel_ci: float = 0.0
    min_trials: int = 3

    def with_overrides(self, **kw: Any) -> Plan:
        return Plan(**{**asdict(self), **kw})


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
    # call and the board's state before them (``_energy_figures``)
    energy_burst: dict[str, Any] | None = None
    at_cap: bool = False  # the warm-up ended with the board's power at the cap (cap_fraction)
    reps_queued: list[float | None] = field(default_factory=list)  # per trial (module doc)
    # host seconds to queue a rep (median of the probe; when the driver's queue is full,
    # as it is for a host far ahead, the host waits for the GPU and this reads its pace)
    host_rep_s: float | None = None
    rep_hold_s: float = 0.0  # the hold before each rep's start event (0: none; module doc)
    # Events mode over several input sets (or placed copies): each set's median over the
    # trials' reps, in set order. A kernel whose time depends on where its inputs lie
    # shows it here while a trial's median hides it (docs/journal/2026-12-02.md, "Early afternoon of
    # 2026-12-02": a decode GEMM read 88 to ~101 us by placement).
    input_set_medians_s: list[float] = field(default_factory=list)
    # Each warm-up trial: end (s after the warm-up began), median seconds per call, SM
    # clock and board power. What settling took, case by case, from whole-suite runs.
    warmup_trace: list[dict[str, float | None]] = field(default_factory=list)
    # Why the trials ended (``trials_stop``): "fixed" (adaptive trials off), "precise"
    # (the median known to ``stop_rel_ci``), "max_trials" (not precise within the most),
    # "at_cap" (no early stop at the power cap). ``median_rel_half_width``: the 95%
    # interval's half-width over the median at the end (None: fewer than 2 trials).
    trials_stop: str = "fixed"
    median_rel_half_width: float | None = None

    def asv_result(self) -> dict[str, Any]:
        """The shape asv parses as a timing: median, CI and Mann-Whitney over samples."""
        return {"samples": list(self.samples), "number": self.number}

    def as_record(self) -> dict[str, Any]:
        rec = asdict(self)
        rec["windows"] = [w.as_dict() for w in self.windows]
        return rec


class _Runner:
    """Times reps of one configuration; holds the events and the rotating calls."""

    def __init__(self, device: Device, calls: Sequence[Callable[[], Any]], plan: Plan) -> None:
        self.device, self.calls, self.plan = device, list(calls), plan
        self.mode = "events"
        self.calls_per_rep = 1
        self._replay: Callable[[], None] | None = None
        self._next = 0
        self.reps_queued: float | None = None  # of the last ``time_reps`` (module doc)
        self.last_reps = 0  # reps of the last ``time_reps``
        self.host_rep_s: float | None = None  # host seconds to queue a rep, last time_reps
        self.gpu_rep_s: float | None = None  # device seconds of a rep, flush included
        self.rep_hold_s = 0.0
        self.last_sets: list[int] = []  # events mode: each rep's input set, last time_reps

    def _call(self) -> None:
        self.calls[self._next % len(self.calls)]()
        self._next += 1

    def use_graph(self, calls_per_rep: int) -> None:
        rotated = [self.calls[i % len(self.calls)] for i in range(calls_per_rep)]
        self._replay = self.device.capture(rotated)
        self.mode, self.calls_per_rep = "graph", calls_per_rep

    def _rep(self) -> None:
        """One rep: a graph replay of ``calls_per_rep`` calls, or one call."""
        if self._replay is not None:
            self._replay()
        else:
            self._call()

    def hold_for_host(self) -> None:
        """A hold before every rep's start event when the last ``time_reps`` ended with
        the host fewer than ``host_ahead_reps`` reps ahead of the GPU (module doc)."""
        ahead_needed = min(self.plan.host_ahead_reps, self.last_reps / 2)  # a short batch
        behind = self.reps_queued is not None and self.reps_queued < ahead_needed
        if self.mode == "events" and behind and self.host_rep_s:
            need_s = self.plan.host_margin * self.host_rep_s
            held_s = self._held_s(need_s)  # a hold spins clock cycles: it may run short
            scale = need_s / held_s if 0 < held_s < need_s else 1.0
            self.rep_hold_s = min(need_s * scale, self.plan.max_rep_hold_s)

    def _held_s(self, seconds: float) -> float:
        """Device seconds a hold of ``seconds`` takes."""
        dev = self.device
        start, end = dev.event(), dev.event()
        start.record()
        dev.hold(seconds)
        end.record()
        dev.synchronize()
        return start.elapsed_time(end) * 1e-3

    def burst(self, calls: int) -> tuple[float, int]:
        """(device seconds, calls run) of about ``calls`` calls back to back, with no flush
        in between (whole reps or graphs of them). By graph replay when the host cannot
        launch the calls as fast as the GPU runs them: idle gaps would count as the calls'
        time and energy. A call that cannot be captured is launched one by one."""
        dev = self.device
        rep, per = self._rep, self.calls_per_rep
        if self.rep_hold_s and dev.supports_graphs:
            graph_calls = int(min(self.plan.max_graph_calls, max(
                10, self.plan.graph_rep_s / max(self.gpu_rep_s or 0.0, 1e-9))))
            try:
                rep = dev.capture([self.calls[i % len(self.calls)] for i in range(graph_calls)])
                per = graph_calls
            except RuntimeError:
                pass
        start, end = dev.event(), dev.event()
        dev.hold(self.plan.lead_hold_s)
        start.record()
        replays = max(1, calls // per)
        for _ in range(replays):
            rep()
        end.record()
        dev.synchronize()
        return start.elapsed_time(end) * 1e-3, replays * per

    def time_reps(self, reps: int, lead_hold: bool = False) -> list[float]:
        """Seconds per call of each rep, all reps enqueued before one synchronize."""
        dev = self.device
        flush = self.plan.flush_l2 and self.mode == "events"
        pairs = [(dev.event(), dev.event()) for _ in range(reps)]
        if lead_hold or not flush:
            dev.hold(self.plan.lead_hold_s)
        first_call, host_s = self._next, []
        for start, end in pairs:
            began = time.perf_counter()
            if flush:
                dev.flush_l2()
            if self.rep_hold_s:
                dev.hold(self.rep_hold_s)
            start.record()
            self._rep()
            end.record()
            host_s.append(time.perf_counter() - began)
        queued_at = time.perf_counter()
        dev.synchronize()
        drained_s = time.perf_counter() - queued_at
        span_s = pairs[0][0].elapsed_time(pairs[-1][1]) * 1e-3
        self.reps_queued, self.last_reps = reps_queued(drained_s, span_s, reps), reps
        self.host_rep_s, self.gpu_rep_s = statistics.median(host_s), span_s / reps
        self.last_sets = ([] if self._replay is not None else  # a replay mixes the sets
                          [(first_call + i) % len(self.calls) for i in range(reps)])
        per = self.calls_per_rep
        return [s.elapsed_time(e) * 1e-3 / per for s, e in pairs]


def _reps(rep_s: float, plan: Plan) -> int:
    """Reps of ``rep_s`` device seconds each that make a trial of ``min_trial_s``."""
    return int(min(plan.max_reps, max(plan.min_reps, plan.min_trial_s / max(rep_s, 1e-9))))


def reps_queued(drained_s: float, span_s: float, reps: int) -> float | None:
    """Reps of GPU work still queued when the host had queued the last one: the host's
    wait in ``synchronize`` over the GPU's time per rep (None if that is unknown)."""
    return drained_s / (span_s / reps) if span_s > 0 and reps > 0 else None


def _spread(values: Sequence[float]) -> float:
    lo, hi = min(values), max(values)
    return (hi - lo) / hi if hi > 0 else 0.0


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
    runner = _Runner(device, calls, plan)
    estimate = statistics.median(runner.time_reps(plan.estimate_calls, lead_hold=True))
    host_rep_s, began = runner.host_rep_s, None
    if estimate < plan.graph_below_s and device.supports_graphs:
        per_replay = plan.graph_rep_s / max(estimate, 1e-9)
        calls_per_rep = int(min(plan.max_graph_calls, max(10, per_replay)))
        runner.use_graph(calls_per_rep)
        estimate = statistics.median(runner.time_reps(3))
    else:  # does the host stay ahead over a trial's worth of reps? (it warms up too)
        began = clock()
        runner.time_reps(_reps(estimate, plan))
        host_rep_s = runner.host_rep_s
        runner.hold_for_host()
    reps = _reps(estimate * runner.calls_per_rep + runner.rep_hold_s, plan)

    with Sampler(source, period_s=sampler_period_s) as sampler:
        warm = _warm_up(runner, reps, plan, sampler, clock, began)
        trials = plan.trials_at_cap if warm.at_cap and plan.trials_at_cap else plan.trials
        samples, windows, spans, queued = [], [], [], []
        by_set: dict[int, list[float]] = {}
        stop = _trials_stop(plan, warm.at_cap, samples)
        while len(samples) < trials and stop != "precise":
            t0 = clock()
            times = runner.time_reps(reps)
            t1 = clock()
            samples.append(statistics.median(times))
            for input_set, seconds in zip(runner.last_sets, times, strict=False):
                by_set.setdefault(input_set, []).append(seconds)
            queued.append(runner.reps_queued)
            windows.append(sampler.window(t0, t1))
            spans.append(t1 - t0)
            stop = _trials_stop(plan, warm.at_cap, samples)
        bursts = _energy_bursts(runner, plan, sampler, statistics.median(samples), clock)
        # readings trail the work by the source's lag: wait so the last window is filled
        if source.lag_s or bursts:
            _wait_for_reading_after(sampler, max([t1, *(b["t1"] for b in bursts)])
                                    + source.lag_s)
            windows[-1] = sampler.window(t0, t1)
        energy_per_call, burst = _energy_figures(bursts, sampler) if bursts else (None, None)

    return Measurement(
        samples=samples,
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
        windows=windows,
        telemetry_read_errors=sampler.errors,
        trial_spans_s=spans,
        energy_per_call_j=energy_per_call,
        energy_burst=burst,
        reps_queued=queued,
        input_set_medians_s=([statistics.median(by_set[i]) for i in sorted(by_set)]
                             if len(by_set) > 1 else []),
        host_rep_s=host_rep_s,
        rep_hold_s=runner.rep_hold_s,
        warmup_trace=warm.trace,
        trials_stop=stop,
        median_rel_half_width=median_rel_half_width(samples),
    )


# Student's t at 97.5% by degrees of freedom (1-30); beyond, the normal's 1.96 within 4%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def median_rel_half_width(samples: Sequence[float]) -> float | None:
    """The half-width of a 95% interval of the samples' median, over the median: Student's
    t times the median's standard error for near-normal samples, sqrt(pi / 2) s / sqrt(n).
    A trial is the median of hundreds of reps, so trials scatter near-normally; one that
    caught a hiccup widens the interval, and sampling goes on."""
    n = len(samples)
    median = statistics.median(samples) if samples else 0.0
    if n < 2 or median <= 0:
        return None
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return t * math.sqrt(math.pi / 2) * statistics.stdev(samples) / math.sqrt(n) / median


def _trials_stop(plan: Plan, at_cap: bool, samples: Sequence[float]) -> str:
    """Why the trials would end after ``samples`` (``Measurement.trials_stop``)."""
    if plan.stop_rel_ci <= 0:
        return "fixed"
    if at_cap:
        return "at_cap"
    if len(samples) >= plan.min_trials:
        width = median_rel_half_width(samples)
        if width is not None and width <= plan.stop_rel_ci:
            return "precise"
    return "max_trials"


ENERGY_POLL_S = 0.002  # the counter's update instants to ~2 ms during the burst


def _energy_bursts(runner: _Runner, plan: Plan, sampler: Sampler, call_s: float,
                   clock: Callable[[], float]) -> list[dict[str, Any]]:
    """``plan.energy_bursts`` bursts of calls back to back for ``plan.energy_s`` each,
    bracketed by host times for the energy counter; none when the source reads no energy
    (or power) at all."""
    if plan.energy_s <= 0 or plan.energy_bursts < 1 or not sampler.has_energy():
        return []
    calls = int(max(runner.calls_per_rep, plan.energy_s / max(call_s, 1e-9)))
    bursts = []
    with sampler.polling_every(ENERGY_POLL_S):
        for _ in range(plan.energy_bursts):
            t0 = clock()
            device_s, done = runner.burst(calls)
            t1 = clock()
            bursts.append({"calls": done, "device_s": device_s, "span_s": t1 - t0,
                           "t0": t0, "t1": t1})
    return bursts


def _burst_power(burst: dict[str, Any], sampler: Sampler) -> float | None:
    """A burst's mean watts, by the energy counter's own updates where it moved at least
    twice inside it, else by the power readings; notes which, and the updates used."""
    t_lo, t_hi = burst.pop("t0"), burst.pop("t1")
    updates = sampler.counter_updates(t_lo, t_hi)
    watts = sampler.counter_power(t_lo, t_hi)
    burst["power_from"] = "energy counter" if watts is not None else "power readings"
    burst["counter_updates"] = len(updates)
    burst["counter_span_s"] = updates[-1][0] - updates[0][0] if len(updates) > 1 else 0.0
    if watts is None:
        watts = sampler.window(t_lo, t_hi).power_w_mean
    burst["power_w"] = watts
    return watts


def _energy_figures(bursts: list[dict[str, Any]], sampler: Sampler
                    ) -> tuple[float | None, dict[str, Any]]:
    """(energy per call, the record of the bursts). Energy per call is the median over the
    bursts; beside it, each burst's figure, their spread, and the board's state when the
    measurement began and just before the first burst: the same kernel's energy per call
    moved ~10% with that state on an H200 (docs/site.md, 'Energy per call')."""
    start = sampler.reading_at(float("-inf"))
    before = sampler.reading_at(bursts[0]["t0"])
    per_call = []
    for b in bursts:
        watts = _burst_power(b, sampler)
        per_call.append(watts * b["device_s"] / b["calls"] if watts is not None else None)
    known = [e for e in per_call if e is not None]
    energy = statistics.median(known) if known else None
    powers = [b["power_w"] for b in bursts if b["power_w"] is not None]
    record = {
        "bursts": len(bursts), "calls": sum(b["calls"] for b in bursts),
        "device_s": sum(b["device_s"] for b in bursts),
        "span_s": sum(b["span_s"] for b in bursts),
        "power_w": statistics.median(powers) if powers else None,
        "power_from": bursts[0]["power_from"],
        "counter_updates": sum(b["counter_updates"] for b in bursts),
        "energy_per_call_j": per_call,
        "spread": (max(known) - min(known)) / energy if len(known) > 1 and energy else None,
        "temperature_c_start": start.temperature_c if start else None,
        "temperature_c_before": before.temperature_c if before else None,
        "power_w_before": before.power_w if before else None,
        "per_burst": bursts,
    }
    return energy, record


def _wait_for_reading_after(sampler: Sampler, t: float, limit_s: float = 0.5) -> None:
    deadline = time.perf_counter() + limit_s
    while sampler.last_reading_t() < t and time.perf_counter() < deadline:
        time.sleep(0.01)


def _level_moved(values: Sequence[float], k: int) -> float:
    before, last = statistics.median(values[-2 * k:-k]), statistics.median(values[-k:])
    return abs(last / before - 1.0) if before else 0.0


def _settled(values: list[float], clocks: list[float | None], plan: Plan,
             powers: Sequence[float | None] = (), at_cap: bool = False) -> bool:
    k, tol = plan.settle_trials, plan.settle_tol
    if len(values) < k:
        return False
    if at_cap:
        # The power controller holds the board at its limit by swinging the clock in a
        # cycle longer than a trial: neither trials nor clocks ever agree within ``tol``
        # (a capped FP8 GEMM warmed up 3.05 s, 26 trials, for that alone: H200, 2026-12-01,
        # docs/journal/2026-12-01.md). Once the cap rule's time is over, the level holding is
        # enough.
        return len(values) >= 2 * k and _level_moved(values, k) <= tol
    recent_power = [p for p in powers[-k:] if p is not None]
    if len(recent_power) == k and _spread(recent_power) > plan.settle_power_tol:
        return False  # the board's power (a ~1 s average) is still moving
    known = [c for c in clocks[-k:] if c is not None]
    if _spread(values[-k:]) <= tol and (len(known) < 2 or _spread(known) <= tol):
        return True
    if len(values) < 2 * k:
        return False
    known = [c for c in clocks[-2 * k:] if c is not None]
    clock_still = len(known) < 2 * k or _level_moved(known, k) <= tol / 2
    return _level_moved(values, k) <= tol / 2 and clock_still


def _at_cap(power_w: float | None, limit_w: float | None, plan: Plan) -> bool:
    return bool(power_w is not None and limit_w and power_w >= plan.cap_fraction * limit_w)


def _cap_wait_s(ends: Sequence[float], powers: Sequence[float | None],
                limits: Sequence[float | None], start: float, plan: Plan) -> float:
    """How much longer a warm-up must run because its board power is near the limit
    (0 when it is not, or has run long enough). ``ends``: each warm-up trial's end,
    ``powers`` and ``limits`` its mean power and enforced limit."""
    def reached(fraction: float) -> list[float]:
        return [t for t, p, cap in zip(ends, powers, limits, strict=True)
                if p is not None and cap and p >= fraction * cap]

    if not reached(plan.cap_near_fraction):
        return 0.0
    now = ends[-1]
    wait = start + plan.power_window_s - now
    capped = reached(plan.cap_fraction)
    if capped:
        wait = max(wait, capped[0] + plan.cap_settle_s - now)
    return max(0.0, wait)


@dataclass(frozen=True)
class WarmUp:
    trials: int
    seconds: float
    settled: bool
    at_cap: bool  # its last trial's board power was at the cap
    trace: list[dict[str, float | None]] = field(default_factory=list)


def _warm_up(runner: _Runner, reps: int, plan: Plan, sampler: Sampler,
             clock: Callable[[], float], began: float | None = None) -> WarmUp:
    """Run trials until the level has stopped moving, in time and in SM clock.

    A power-capped GEMM starts 12-15% fast after idle and slows as the clock falls to
    its steady state (H200, 2026-12-01, docs/journal/2026-12-01.md): samples taken before that are
    not comparable with samples taken after it. Settled means the board's power has stopped moving
    (``settle_power_tol`` over the last ``settle_trials``; without it a GEMM's trials
    agreed at 1440 MHz for 0.45 s and then dipped to 1268 MHz when the averaged power
    reached the cap), and either ``settle_trials`` in a row agree within ``settle_tol``
    in time and clock, or, for a kernel whose trials never agree that closely, the
    medians of the last two groups of ``settle_trials`` agree within half of it: the
    drift is over even if the noise is not (a warm-up took 7.9 s under the first rule
    alone). Near the power limit it also runs as long as ``_cap_wait_s`` says; at the
    limit, the level holding within ``settle_tol`` settles it (``_settled``).
    """
    start = clock() if began is None else began  # the host's probe ran from ``began``
    values: list[float] = []
    clocks: list[float | None] = []
    powers: list[float | None] = []
    limits: list[float | None] = []
    ends: list[float] = []
    trace: list[dict[str, float | None]] = []
    n = 0
    while True:
        t0 = clock()
        values.append(statistics.median(runner.time_reps(reps)))
        t1 = clock()
        window = sampler.window(t0, t1)
        clocks.append(window.sm_clock_mhz_median)
        powers.append(window.power_w_mean)
        limits.append(window.power_limit_w)
        ends.append(t1)
        n += 1
        elapsed = t1 - start
        trace.append({"t_s": round(elapsed, 4), "s": values[-1], "mhz": clocks[-1],
                      "w": powers[-1]})
        at_cap = _at_cap(powers[-1], limits[-1], plan)
        if (elapsed >= plan.warmup_min_s and _cap_wait_s(ends, powers, limits, start, plan) == 0
                and _settled(values, clocks, plan, powers, at_cap)):
            return WarmUp(n, elapsed, True, at_cap, trace)
        if elapsed >= plan.warmup_max_s:
            return WarmUp(n, elapsed, False, at_cap, trace)
