"""One look: every case's label from the rounds measured so far (pure).

A round's log ratio of head to base is the replicate, rounds within a pair of workers and
pairs as a level (kperf/core/stats.py). A change needs its q-value (Benjamini-Hochberg over
the cases still tested) below the look's share of alpha; SAME needs the interval of two
one-sided tests inside the class's band. Where the environment moved the clock
(``model.attribute``), a change must also hold in cycles (time x clock).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kperf.core import stats
from kperf.core.static import register_headroom
from kperf.gate.config import KernelClass, Thresholds, mostly_capped
from kperf.gate.model import (
    SIDES,
    Block,
    CaseData,
    Verdict,
    attribute,
    placed_log_ratio,
    side_methods,
    side_modes,
)

# The level of the interval a report shows for a change (its p-value does not depend on it).
CHANGE_LEVEL = 0.99
# Rounds of each order before the order of the sides is fitted at the cap: with fewer, the
# degree of freedom it costs weighs more than the spread it removes (four capped GEMM
# rounds of +1.7 to +2.5% lost their SLOW to t with 2 df: the gate of 2026-12-04 01:06 UTC on
# an H200, GPU-f7b1c892, replayed;
# docs/gate-evidence.md "The order of the sides at the cap").
ORDER_MIN_ROUNDS = 3


@dataclass
class Rounds:
    """A case's rounds as log ratios, one list per pair of workers: of time, and of
    cycles where the environment moved the clock; ``fitted`` effects taken out of them."""

    time: list[list[float]]
    cycles: list[list[float]] | None = None
    fitted: int = 0


@dataclass
class _Tested:
    verdict: Verdict
    klass: KernelClass
    rounds: Rounds

    def compare(self, d: list[list[float]], level: float) -> stats.Comparison:
        return compare_groups(d, level, self.klass, self.rounds.fitted)

    @property
    def p_case(self) -> float:
        return claim_p(self.rounds, self.klass)


def claim_p(rounds: Rounds, klass: KernelClass) -> float:
    """The p-value of a change. Intersection-union: where the environment moved the clock
    (``cycles`` given), a change is claimed only if it holds in time and in cycles."""
    p = compare_groups(rounds.time, CHANGE_LEVEL, klass, rounds.fitted).p_value
    if rounds.cycles:
        return max(p, compare_groups(rounds.cycles, CHANGE_LEVEL, klass, rounds.fitted).p_value)
    return p


def compare_groups(d: list[list[float]], level: float, klass: KernelClass,
                   fitted: int = 0) -> stats.Comparison:
    """Rounds within pairs of workers, pairs as a level (kperf/core/stats.random_effects)."""
    return stats.random_effects(d, level, klass.sd_floor, klass.pair_offset_sd, fitted)


def case_rounds(data: CaseData, groups: Sequence[Sequence[tuple[Block, Block]]],
                th: Thresholds, placed: bool, environment: bool) -> Rounds:
    """The rounds a look or a re-measure judges. At the power cap, less the order of the
    sides (``without_order``)."""
    time = log_ratio_groups(groups, by_placement=placed)
    cycles = log_ratio_groups(groups, True, placed) if environment else None
    if not mostly_capped(data.capped_share(th)):
        return Rounds(time, cycles)
    orders = [[b.first_in(h) for b, h in g] for g in groups]
    time, fitted = without_order(time, orders)
    if cycles is not None and fitted:
        cycles, _ = without_order(cycles, orders)
    return Rounds(time, cycles, fitted)


def without_order(d: list[list[float]], base_first: list[list[bool | None]]
                  ) -> tuple[list[list[float]], int]:
    """The rounds' log ratios less the effect of which side went first, and 1 (the effect
    fitted); unchanged, and 0, unless every pair of workers measured one round and each
    order has ``ORDER_MIN_ROUNDS`` at least. At the power cap the first block of a round follows
    another case's load: a softmax at the cap read 0.8-1.2% slower first in both runs of
    a night, its rounds alternating in sign (sd 1.1-1.4%, 0.6-0.7% with the order taken
    out: H200 GPU-f7b1c892, 2026-12-04, docs/gate-evidence.md "The order of the sides at
    the cap").
    The sides alternate, so the estimate of the change is the mean of the two orders'
    means, whatever the effect is."""
    flat = [(x, o) for g, og in zip(d, base_first, strict=True) for x, o in zip(g, og, strict=True)]
    if any(len(g) != 1 for g in d) or any(o is None for _, o in flat):
        return d, 0
    first = [x for x, o in flat if o]
    second = [x for x, o in flat if not o]
    if min(len(first), len(second)) < ORDER_MIN_ROUNDS:
        return d, 0
    half = (statistics.fmean(first) - statistics.fmean(second)) / 2.0
    return [[x - half if o else x + half for x, o in zip(g, og, strict=True)]
            for g, og in zip(d, base_first, strict=True)], 1


def log_ratio_groups(groups: Sequence[Sequence[tuple[Block, Block]]],
                     cycles: bool = False, by_placement: bool = False) -> list[list[float]]:
    """Each pair of workers' rounds as log ratios (of time, or of cycles: time x clock)."""
    sides = side_modes([p for g in groups for p in g]) if by_placement else None
    return [_log_ratios(g, cycles, by_placement, sides) for g in groups]


def _log_ratios(pairs: Sequence[tuple[Block, Block]], cycles: bool,
                by_placement: bool = False,
                sides: tuple[list[float], list[float]] | None = None) -> list[float]:
    def clock_log(b: Block, h: Block) -> float:
        return math.log((h.clock() or 1.0) / (b.clock() or 1.0)) if cycles else 0.0

    if by_placement:
        return [placed_log_ratio(b, h, sides) + clock_log(b, h) for b, h in pairs]
    return [math.log(h.level() / b.level()) + clock_log(b, h) for b, h in pairs]


def flip(label: str, higher_is_better: bool) -> str:
    if not higher_is_better:
        return label
    return {"SLOW": "FAST", "FAST": "SLOW"}.get(label, label)


def _status(data: CaseData) -> str:
    """Why a case cannot be compared, or '' when it can."""
    for which in SIDES:
        failed = [b for b in data.side(which) if b.status == "failed"]
        if failed:
            first = failed[0]
            return f"failed at {which} (round {first.round}): {first.error.splitlines()[0][:300]}"
    for which in SIDES:
        blocks = data.side(which)
        if blocks and all(b.status == "skipped" for b in blocks):
            return f"skipped at {which}: " + (blocks[0].error.splitlines() or [""])[0][:200]
    return ""


def assess(data: CaseData, th: Thresholds, upto: int | None) -> Verdict | _Tested:
    rule, klass = th.rule_for(data.name)
    capped = th.class_at_cap(klass, data.capped_share(th))
    v = Verdict(data.name, data.env, capped.name, unit=data.unit,
                higher_is_better=rule.higher_is_better,
                rule_class=klass.name if capped is not klass else "")
    klass = capped
    why = _status(data)
    if why:
        v.reason, v.decided = why, True
        v.broke = why.startswith("failed at head")
        if why.startswith("skipped at base") and all(
                b.status == "skipped" for b in data.side("head")):
            v.reason, v.skipped = "skipped on both sides", True
        return v
    pairs = data.pairs(upto)
    v.rounds = len(pairs)
    v.rounds_again = sum(1 for b, h in pairs if b.retry or h.retry)
    if not pairs:
        v.reason = "no round measured both sides"
        return v
    placed = klass.level_by_placement
    v.before = statistics.median(b.level(placed) for b, _ in pairs)
    v.after = statistics.median(h.level(placed) for _, h in pairs)
    v.ratio = v.after / v.before if v.before else None
    if klass.exact:
        return _exact(v, pairs, klass)
    if len(pairs) < th.sequential.min_rounds:
        v.reason = f"{len(pairs)} of at least {th.sequential.min_rounds} rounds measured"
        return v
    return _tested(v, pairs, th, klass, data, upto)


def _exact(v: Verdict, pairs: Sequence[tuple[Block, Block]], klass: KernelClass) -> Verdict:
    before = {b.level() for b, _ in pairs}
    after = {h.level() for _, h in pairs}
    v.decided = True
    if len(before) > 1 or len(after) > 1:
        v.reason = f"a static figure changed between rounds ({sorted(before)}, {sorted(after)})"
        return v
    b, h = before.pop(), after.pop()
    raw = "SAME" if h == b else ("SLOW" if h > b else "FAST")
    v.verdict = flip(raw, v.higher_is_better)
    v.reason = "" if raw == "SAME" else "static figure: exact comparison"
    if v.verdict != "SLOW":
        return v
    cost = static_cost(pairs[-1][0].figures, pairs[-1][1].figures)
    if klass.slow_only_with_cost and not cost.startswith("costs"):
        v.verdict, v.reason = "SAME", cost
    elif klass.slow_only_with_cost or not cost.startswith("costs: unknown"):
        v.reason = cost  # what it costs, in the code's terms, where the figures say
    return v


def static_cost(base: dict[str, Any] | None, head: dict[str, Any] | None) -> str:
    """What a resource that grew costs its kernel: "costs: occupancy 2 → 1" (the
    occupancy fell, spills or scratch grew, it cannot launch), else "changed, ..." with the
    headroom left at its occupancy; "costs: ..." too where the figures do not say."""
    if not base or not head:
        return "costs: unknown (a side's figures are not recorded)"
    num = _figure
    costs = [f"{what} {num(base, key):g} → {num(head, key):g}" for key, what in (
        ("vgpr_spills", "VGPR spills"), ("sgpr_spills", "SGPR spills"),
        ("scratch_bytes", "scratch bytes")) if num(head, key) > num(base, key)]
    if "occupancy" not in base or "occupancy" not in head:
        return "costs: unknown (no occupancy recorded)"
    if num(head, "occupancy") < num(base, "occupancy"):
        costs.insert(0, f"occupancy {num(base, 'occupancy'):g} → {num(head, 'occupancy'):g}"
                        f" ({head.get('occupancy_limit') or '?'})")
    if costs:
        return "costs: " + ", ".join(costs)
    amd = "sgprs" in head  # gfx942's figures count SGPRs; sm_90a's do not
    room = register_headroom(head, amd)
    return (f"changed, no cost: occupancy {num(head, 'occupancy'):g} unchanged"
            + (f"; {room}" if room else ""))


def _figure(figures: dict[str, Any], key: str) -> float:
    value = figures.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _tested(v: Verdict, pairs: Sequence[tuple[Block, Block]], th: Thresholds,
            klass: KernelClass, data: CaseData, upto: int | None) -> _Tested:
    who = attribute(pairs, th)
    v.attribution = who.kind
    v.methods = side_methods(pairs)
    placed = klass.level_by_placement
    clocks = [(b.clock(), h.clock()) for b, h in pairs]
    if all(cb and ch for cb, ch in clocks):
        v.clock_base_mhz = statistics.median(cb for cb, _ in clocks)
        v.clock_head_mhz = statistics.median(ch for _, ch in clocks)
        v.cycles_ratio = math.exp(statistics.fmean(log_ratio_groups([pairs], True, placed)[0]))
    energies = [(b.energy_per_call_j(placed), h.energy_per_call_j(placed)) for b, h in pairs]
    if all(eb and eh for eb, eh in energies):
        v.energy_ratio = math.exp(statistics.fmean(math.log(eh / eb) for eb, eh in energies))
        v.power_w = (statistics.median(b.power() for b, _ in pairs),
                     statistics.median(h.power() for _, h in pairs))
    limits = [blk.power_limit_w for pair in pairs for blk in pair if blk.power_limit_w]
    v.power_limit_w = min(limits) if limits else None
    return _Tested(v, klass, case_rounds(data, data.groups(upto), th, placed,
                                         who.kind == "environment"))


def decide_look(cases: Sequence[CaseData], th: Thresholds, upto: int | None, look: int,
                looks: int) -> list[Verdict]:
    """Every case at one look (rounds <= ``upto``), with this look's share of alpha and
    beta and one suite-wide correction over the cases still being tested."""
    power = th.sequential.spending_power
    alpha_k = stats.spent(th.alpha, look, looks, power)
    beta_k = stats.spent(th.beta, look, looks, power)
    done: list[Verdict] = []
    tested: list[_Tested] = []
    for data in cases:
        out = assess(data, th, upto)
        (tested if isinstance(out, _Tested) else done).append(out)
    q_values = stats.adjust([t.p_case for t in tested], th.correction)
    for t, q in zip(tested, q_values, strict=True):
        done.append(_finish(t, q, alpha_k, beta_k, look))
    return done


def _finish(t: _Tested, q: float, alpha_k: float, beta_k: float, look: int) -> Verdict:
    """The look's label. A change needs q < alpha_k; SAME needs the interval of two
    one-sided tests at beta_k (level 1 - 2 beta_k) inside the class's band."""
    v, k = t.verdict, t.klass
    time, cycles = t.rounds.time, t.rounds.cycles
    change, same = t.compare(time, CHANGE_LEVEL), t.compare(time, 1.0 - 2.0 * beta_k)
    v.p_value, v.q_value, v.look, v.ratio = change.p_value, q, look, change.ratio
    v.ci = (same.ci_low, same.ci_high)
    time_label = stats.label(change, same, q, alpha_k, k.min_ratio, k.same_ratio)
    if cycles is None:
        _apply(v, time_label, _code_note(v) if v.attribution == "code" else "")
        return v
    c_change, c_same = (t.compare(cycles, CHANGE_LEVEL),
                        t.compare(cycles, 1.0 - 2.0 * beta_k))
    cycle_label = stats.label(c_change, c_same, q, alpha_k, k.min_ratio, k.same_ratio)
    clocks = (f"clocks differed (base {v.clock_base_mhz:.0f} MHz, head "
              f"{v.clock_head_mhz:.0f} MHz) from outside")
    if time_label == cycle_label and time_label != "NOISY":
        _apply(v, time_label, f"{clocks}; holds in cycles (x{c_change.ratio:.3f})")
        return v
    why = ("time and cycles disagree" if "NOISY" not in (time_label, cycle_label)
           else "not decided in both time and cycles yet")
    v.reason = f"{clocks}: time x{change.ratio:.3f}, cycles x{c_change.ratio:.3f}; {why}"
    return v


def _code_note(v: Verdict) -> str:
    parts = []
    if v.energy_ratio is not None:
        parts.append(f"energy per call {100 * (v.energy_ratio - 1):+.1f}%")
    limit = f" at the {v.power_limit_w:.0f} W power limit" if v.power_limit_w else ""
    parts.append(f"clock {v.clock_base_mhz:.0f} → {v.clock_head_mhz:.0f} MHz{limit}: the "
                 f"code's own (it follows the side in every round)")
    if v.cycles_ratio is not None:
        parts.append(f"at equal clocks x{v.cycles_ratio:.3f}")
    return "; ".join(parts)


def _apply(v: Verdict, label: str, note: str) -> None:
    if label == "NOISY":
        lo, hi = v.ci or (math.nan, math.nan)
        v.reason = f"not decided yet: interval [{lo:.3f}, {hi:.3f}]" + (f"; {note}" if note else "")
        return
    v.verdict, v.reason, v.decided = flip(label, v.higher_is_better), note, True
