"""Warm-up: trials until the level has stopped moving, in time, SM clock and board power,
with the power cap's own rules (``Plan.warmup_min_s`` and the settings after it)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from kperf.core.plan import Plan
from kperf.core.reps import Runner
from kperf.core.telemetry import Sampler


def _spread(values: Sequence[float]) -> float:
    lo, hi = min(values), max(values)
    return (hi - lo) / hi if hi > 0 else 0.0


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


# How finely the sampler polls during a warm-up, so the energy counter's update instants
# (every ~100 ms on an H200, docs/journal/2026-12-01.md "Energy counter") are known to a few
# ms, and the least span of updates a cool warm-up's power is read over
WARMUP_POLL_S = 0.005
COOL_COUNTER_SPAN_S = 0.15


def _cool_rule_on(plan: Plan) -> bool:
    return 0 < plan.cool_warmup_min_s < plan.warmup_min_s


def _cool(counter_w: float | None, averaged_w: float | None, limit_w: float | None,
          plan: Plan) -> bool:
    """Far enough from the power cap that the cap cannot hold the clock down: under
    ``cap_near_fraction`` of the limit by the energy counter and by the averaged reading
    (which, after a capped case, still carries that case's load for ~1 s)."""
    if counter_w is None or averaged_w is None or not limit_w:
        return False
    return max(counter_w, averaged_w) < plan.cap_near_fraction * limit_w


@dataclass(frozen=True)
class WarmUp:
    trials: int
    seconds: float
    settled: bool
    at_cap: bool  # its last trial's board power was at the cap
    trace: list[dict[str, float | None]] = field(default_factory=list)
    cool: bool = False  # ended by the cool rule (``Plan.cool_warmup_min_s``)


def warm_up(runner: Runner, reps: int, plan: Plan, sampler: Sampler,
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
    limit, the level holding within ``settle_tol`` settles it (``_settled``). A board
    that draws well under its limit by the energy counter and the averaged reading alike
    (``_cool``) settles on times and clocks alone, from ``cool_warmup_min_s`` on.
    """
    start = clock() if began is None else began  # the host's probe ran from ``began``
    polling = sampler.polling_every(WARMUP_POLL_S) if _cool_rule_on(plan) else nullcontext()
    with polling:
        return _warm_up(runner, reps, plan, sampler, clock, start)


def _warm_up(runner: Runner, reps: int, plan: Plan, sampler: Sampler,
             clock: Callable[[], float], start: float) -> WarmUp:
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
        counter_w = sampler.counter_power(start, t1, COOL_COUNTER_SPAN_S)
        trace.append({"t_s": round(elapsed, 4), "s": values[-1], "mhz": clocks[-1],
                      "w": powers[-1], "counter_w": counter_w})
        if (_cool_rule_on(plan) and elapsed >= plan.cool_warmup_min_s
                and _cool(counter_w, powers[-1], limits[-1], plan)
                and _settled(values, clocks, plan)):
            return WarmUp(n, elapsed, True, False, trace, cool=True)
        at_cap = _at_cap(powers[-1], limits[-1], plan)
        if (elapsed >= plan.warmup_min_s and _cap_wait_s(ends, powers, limits, start, plan) == 0
                and _settled(values, clocks, plan, powers, at_cap)):
            return WarmUp(n, elapsed, True, at_cap, trace)
        if elapsed >= plan.warmup_max_s:
            return WarmUp(n, elapsed, False, at_cap, trace)
