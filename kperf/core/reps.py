"""Reps of one configuration, timed by device events: one call after an L2 flush, or a
graph replay of ``calls_per_rep`` calls over rotating inputs (kperf/core/timing.py).

Host timers are used only to say how far the host was ahead of the GPU when it had queued
a batch's last rep (``reps_queued``). A host that keeps ahead leaves many reps queued;
about one means the GPU waited for the host, and then the events' intervals can hold the
host's launch latency too.

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

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from kperf.core.device import Device
from kperf.core.plan import Plan


class Runner:
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
        self.estimate_hold_s = 0.0  # the hold of the estimate's reps (kperf/core/timing.py)
        self.last_sets: list[int] = []  # events mode: each rep's input set, last time_reps
        self.graph_bursts = False  # a burst launched call by call had gaps (kperf/core/energy.py)
        self.last_burst_by_graph = False  # the last ``burst`` replayed a graph
        self._burst_graph: tuple[Callable[[], None], int] | None = None  # (replay, calls)
        self._burst_graph_refused = False  # a call could not be captured

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
        the host fewer than ``host_ahead_reps`` reps ahead of the GPU (module doc). It only
        grows: a measurement's trials are never held less than those before them."""
        ahead_needed = min(self.plan.host_ahead_reps, self.last_reps / 2)  # a short batch
        behind = self.reps_queued is not None and self.reps_queued < ahead_needed
        if self.mode == "events" and behind and self.host_rep_s:
            need_s = self.plan.host_margin * self.host_rep_s
            held_s = self._held_s(need_s)  # a hold spins clock cycles: it may run short
            scale = need_s / held_s if 0 < held_s < need_s else 1.0
            self.rep_hold_s = max(self.rep_hold_s,
                                  min(need_s * scale, self.plan.max_rep_hold_s))

    def outlasted_lead_hold(self) -> bool:
        """Whether the host was still queueing the last ``time_reps`` when the GPU got to
        its reps: then the later reps waited for their launches and their events read them.
        A host that outlasts the hold leaves every rep queued when it is done."""
        return self.reps_queued is not None and self.reps_queued < 0.9 * self.last_reps

    def raise_hold_if_behind(self) -> bool:
        """After a trial: True where the host fell behind in it with the hold then in force
        and ``hold_for_host`` gave a longer one (that trial's intervals may hold the host's
        launch latency)."""
        before = self.hold_before_rep_s
        self.hold_for_host()
        return self.hold_before_rep_s > before

    @property
    def hold_before_rep_s(self) -> float:
        """The hold before each rep's start event: the host's (``rep_hold_s``) or, in
        events mode, at least ``plan.rep_hold_min_s``."""
        if self.mode != "events":
            return self.rep_hold_s
        return max(self.rep_hold_s, self.plan.rep_hold_min_s)

    def _held_s(self, seconds: float) -> float:
        """Device seconds a hold of ``seconds`` takes."""
        dev = self.device
        start, end = dev.event(), dev.event()
        start.record()
        dev.hold(seconds)
        end.record()
        dev.synchronize()
        return start.elapsed_time(end) * 1e-3

    def burst_graph(self) -> tuple[Callable[[], None], int] | None:
        """(replay, calls in it) of the graph the bursts replay when the host cannot launch
        the calls as fast as the GPU runs them (its hold was raised in the trials, or a
        burst launched call by call had gaps, ``graph_bursts``); None where they launch
        call by call, also where a call cannot be captured. Captured once a measurement:
        ``kperf/core/energy.py`` asks for it before a burst's window, since the GPU idles
        while the host captures and the window's power would count that idle time."""
        if not (self.rep_hold_s or self.graph_bursts) or not self.device.supports_graphs:
            return None
        if self._burst_graph is None and not self._burst_graph_refused:
            graph_calls = int(min(self.plan.max_graph_calls, max(
                10, self.plan.graph_rep_s / max(self.gpu_rep_s or 0.0, 1e-9))))
            try:
                self._burst_graph = (self.device.capture(
                    [self.calls[i % len(self.calls)] for i in range(graph_calls)]), graph_calls)
            except RuntimeError:
                self._burst_graph_refused = True
        return self._burst_graph

    def burst(self, calls: int) -> tuple[float, int]:
        """(device seconds, calls run) of about ``calls`` calls back to back, with no flush
        in between: whole reps, or replays of ``burst_graph`` where there is one (idle gaps
        between calls the host launched too slowly would count as the calls' time and
        energy)."""
        dev = self.device
        graph = self.burst_graph()
        rep, per = graph or (self._rep, self.calls_per_rep)
        self.last_burst_by_graph = graph is not None or self.mode == "graph"
        start, end = dev.event(), dev.event()
        dev.hold(self.plan.lead_hold_s)
        start.record()
        replays = max(1, calls // per)
        for _ in range(replays):
            rep()
        end.record()
        dev.synchronize()
        return start.elapsed_time(end) * 1e-3, replays * per

    def time_reps(self, reps: int, lead_hold_s: float | None = None) -> list[float]:
        """Seconds per call of each rep, all reps enqueued before one synchronize, behind a
        hold of ``lead_hold_s`` (default: ``plan.lead_hold_s`` where the reps have no flush
        in front, none where they do)."""
        dev = self.device
        flush = self.plan.flush_l2 and self.mode == "events"
        pairs = [(dev.event(), dev.event()) for _ in range(reps)]
        if lead_hold_s is None and not flush:
            lead_hold_s = self.plan.lead_hold_s
        if lead_hold_s:
            dev.hold(lead_hold_s)
        first_call, host_s = self._next, []
        hold_s = self.hold_before_rep_s
        for start, end in pairs:
            began = time.perf_counter()
            if flush:
                dev.flush_l2(self.plan.flush_by_reading)
            if hold_s:
                dev.hold(hold_s)
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


def trial_reps(rep_s: float, plan: Plan) -> int:
    """Reps of ``rep_s`` device seconds each that make a trial of ``min_trial_s``."""
    return int(min(plan.max_reps, max(plan.min_reps, plan.min_trial_s / max(rep_s, 1e-9))))


def reps_queued(drained_s: float, span_s: float, reps: int) -> float | None:
    """Reps of GPU work still queued when the host had queued the last one: the host's
    wait in ``synchronize`` over the GPU's time per rep (None if that is unknown)."""
    return drained_s / (span_s / reps) if span_s > 0 and reps > 0 else None

