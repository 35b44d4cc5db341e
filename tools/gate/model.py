"""The verdict model: pure functions from measured blocks to one verdict per case.

A **block** is one side's measurement of one case in one round (warm-up, then a few
trials, each with the telemetry of its window). Base and head are measured next to each
other in every round, their order alternating, so a round's log ratio is the replicate
(harness/stats.py). The gate looks after every round from ``min_rounds`` on; a case stops
being measured once it is SLOW, FAST or SAME, or its budget is spent. The same replay of
looks decides a stored run again (``--no-run``), so a verdict can always be checked.

Clock differences are judged by their cause (``attribute``): at the power limit, with no
thermal or hardware-slowdown bits, a clock gap that follows the side in every round is
the code's doing (it spends more energy per call, so the power controller lowers its
clock): the verdict follows time and the reason says why. Otherwise the gap is the
environment's, and a change must also hold in cycles (time x clock).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import stats
from tools.gate.config import KernelClass, Thresholds

SIDES = ("base", "head")


@dataclass
class Block:
    """One side's measurement of one case in one round."""

    side: str
    round: int
    status: str = "ok"  # "ok" | "failed" | "skipped"
    error: str = ""
    samples: list[float] = field(default_factory=list)  # seconds per call, one per trial
    clocks: list[float | None] = field(default_factory=list)  # MHz, per trial window
    power_w: list[float | None] = field(default_factory=list)
    power_limit_w: float | None = None
    throttle_bits: int | None = None  # OR over the block's windows
    backend: str = "none"  # telemetry backend
    value: float | None = None  # a static figure's value, or asv's value without samples
    confirm: bool = False  # measured by fresh workers to confirm a candidate
    generation: int = 0  # which pair of worker processes measured it
    wall_s: float = 0.0
    warmup_s: float | None = None  # how long its warm-up ran (records before: unknown)
    at_cap: bool | None = None  # its warm-up ended at the power cap (so it took trials_at_cap)
    retry: int = 0  # 1: its round was measured again, a block of the first try disturbed
    reps_queued: list[float | None] = field(default_factory=list)  # per trial: harness/timing.py
    input_set_medians_s: list[float] = field(default_factory=list)  # per placed copy: timing.py

    def spread(self) -> float:
        """How far its trials disagree: their standard deviation over their mean."""
        if len(self.samples) < 2:
            return 0.0
        return statistics.pstdev(self.samples) / statistics.fmean(self.samples)

    def level(self, by_placement: bool = False) -> float:
        """Its time per call: at the power cap the mean of its trials, elsewhere their
        median. At the cap the clock swings in a cycle of ~1 s, so 1.5 s of trials hold a
        cycle and a half and their median depends on the phase they started at; the mean
        is the time average a user gets (docs/gate.md, "At the power cap").

        ``by_placement`` (a class's ``level_by_placement``): the mean over its placed
        copies of each copy's median, where it has them. A kernel whose time follows where
        its inputs lie (a decode GEMM read 88 or ~101 us by placement, docs/journal/2026-12-02.md)
        has trials whose median jumps between the copies' levels with the count of calls
        each copy got; the mean over copies weighs every copy once."""
        if by_placement and len(self.input_set_medians_s) > 1:
            return statistics.fmean(self.input_set_medians_s)
        if not self.samples:
            return float(self.value)
        return (statistics.fmean if self.at_cap else statistics.median)(self.samples)

    def clock(self) -> float | None:
        known = [c for c in self.clocks if c]
        if not known:
            return None
        return (statistics.fmean if self.at_cap else statistics.median)(known)

    def power(self) -> float | None:
        known = [p for p in self.power_w if p]
        return statistics.fmean(known) if known else None

    def energy_per_call_j(self, by_placement: bool = False) -> float | None:
        power = self.power()
        return power * self.level(by_placement) if power else None

    def power_capped(self, th: Thresholds) -> bool:
        """The power controller lowered its clock: a power-cap throttle bit, where the
        backend reports bits. Power near the limit alone is not enough: a block after a
        GEMM reads the board's ~1 s power average high while its own clock stays at the
        maximum (an H200, 2026-12-01, docs/journal/2026-12-01.md 'Before midnight')."""
        return self.at_limit(th) if self.throttle_bits is None else self._cap_bit(th)

    def _cap_bit(self, th: Thresholds) -> bool:
        return bool(self.throttle_bits and self.throttle_bits
                    & th.power_cap_bits.get(self.backend, 0))

    def at_limit(self, th: Thresholds) -> bool:
        if self._cap_bit(th):
            return True
        power = self.power()
        return bool(power and self.power_limit_w and power >= th.power_fraction
                    * self.power_limit_w)


@dataclass
class CaseData:
    name: str  # benchmark(param, ...), as asv names it
    env: str = ""
    unit: str = "seconds"
    blocks: list[Block] = field(default_factory=list)

    def side(self, which: str, confirm: bool | None = None) -> list[Block]:
        return [b for b in self.blocks if b.side == which
                and (confirm is None or b.confirm == confirm)]

    def capped_share(self, th: Thresholds) -> float:
        """The share of its measured blocks the power controller held down."""
        known = [b.power_capped(th) for b in self.blocks if b.status == "ok" and b.samples]
        return sum(known) / len(known) if known else 0.0

    def pairs(self, upto: int | None = None, confirm: bool | None = False
              ) -> list[tuple[Block, Block]]:
        """(base, head) of every round both measured (rounds <= ``upto``); of a round
        measured again, its second try, if both sides got one."""
        tries: dict[tuple[int, bool], dict[int, dict[str, Block]]] = {}
        for b in self.blocks:
            if b.status == "ok" and (confirm is None or b.confirm == confirm) and (
                    upto is None or b.round <= upto):
                tries.setdefault((b.round, b.confirm), {}).setdefault(b.retry, {})[b.side] = b
        out = []
        for _, by_try in sorted(tries.items()):
            whole = [sides for _, sides in sorted(by_try.items()) if len(sides) == 2]
            if whole:
                out.append((whole[-1]["base"], whole[-1]["head"]))
        return out

    def groups(self, upto: int | None = None, confirm: bool | None = False
               ) -> list[list[tuple[Block, Block]]]:
        """``pairs`` grouped by the pair of worker processes that measured them."""
        out: dict[int, list[tuple[Block, Block]]] = {}
        for pair in self.pairs(upto, confirm):
            out.setdefault(pair[0].generation, []).append(pair)
        return [out[g] for g in sorted(out)]


@dataclass
class Verdict:
    case: str
    env: str
    klass: str
    verdict: str = "INCONCLUSIVE"  # SLOW | FAST | SAME | INCONCLUSIVE
    reason: str = ""
    decided: bool = False  # no more rounds needed
    unit: str = "seconds"
    before: float | None = None
    after: float | None = None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    q_value: float | None = None
    rounds: int = 0
    rounds_again: int = 0  # of them, rounds measured a second time (a block was disturbed)
    look: int | None = None
    clock_base_mhz: float | None = None
    clock_head_mhz: float | None = None
    cycles_ratio: float | None = None
    energy_ratio: float | None = None
    power_w: tuple[float | None, float | None] | None = None
    power_limit_w: float | None = None
    attribution: str = "none"  # none | code | environment
    broke: bool = False
    skipped: bool = False  # skipped on both sides: nothing to compare, not reported
    unchanged: bool = False  # SAME unmeasured: its op's code is the same at base and head
    candidate: str = ""  # SLOW or FAST before the re-measure by fresh workers
    confirmed: bool | None = None
    higher_is_better: bool = False
    rule_class: str = ""  # the class its rule gives, where the power cap made it ``klass``

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci"] = list(self.ci) if self.ci else None
        out["power_w"] = list(self.power_w) if self.power_w else None
        return out


# --------------------------------------------------------------------------- attribution


@dataclass(frozen=True)
class Attribution:
    kind: str  # none | code | environment
    why: str = ""


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def attribute(pairs: Sequence[tuple[Block, Block]], th: Thresholds,
              min_pairs: int = 3) -> Attribution:
    """Whose is a clock gap between the sides: nobody's (none), the code's or the
    environment's (docs/gate.md, "Clocks"). The code's needs the gap's sign in
    ``side_share`` of at least ``min_pairs`` pairs: the gate's rounds, 3 at least; the
    history's runs either side of a step (tools/site/steps.py), often one each."""
    clocks = [(b.clock(), h.clock()) for b, h in pairs]
    if not pairs or any(cb is None or ch is None for cb, ch in clocks):
        return Attribution("none", "no clock readings")
    logs = [math.log(ch / cb) for cb, ch in clocks]
    gap = statistics.median(logs)
    if abs(gap) <= math.log1p(th.clock_tolerance):
        return Attribution("none")
    blocks = [blk for pair in pairs for blk in pair]
    env_bits = 0
    for blk in blocks:
        env_bits |= (blk.throttle_bits or 0) & th.environment_bits.get(blk.backend, 0)
    if env_bits:
        return Attribution("environment", f"thermal or hardware-slowdown bits {env_bits:#x}")
    limited = [_share([pair[i].at_limit(th) for pair in pairs]) for i in (0, 1)]
    if min(limited) < th.at_limit_share:
        return Attribution("environment", "not at the power limit on both sides")
    same_sign = _share([math.copysign(1, x) == math.copysign(1, gap) and abs(x) > 0 for x in logs])
    if len(logs) < min_pairs or same_sign < th.side_share:
        return Attribution("environment", "the clock follows the round, not the side")
    return Attribution("code", "the clock follows the side at the power limit")


# --------------------------------------------------------------------------- one look


# The level of the interval a report shows for a change (its p-value does not depend on it).
CHANGE_LEVEL = 0.99


@dataclass
class _Tested:
    verdict: Verdict
    klass: KernelClass
    time: list[list[float]]  # the rounds' log ratios, one list per pair of workers
    cycles: list[list[float]] | None  # only where the environment moved the clock

    def compare(self, d: list[list[float]], level: float) -> stats.Comparison:
        return compare_groups(d, level, self.klass)

    @property
    def p_case(self) -> float:
        return claim_p(self.time, self.cycles, self.klass)


def claim_p(time: list[list[float]], cycles: list[list[float]] | None,
            klass: KernelClass) -> float:
    """The p-value of a change. Intersection-union: where the environment moved the clock
    (``cycles`` given), a change is claimed only if it holds in time and in cycles."""
    p = compare_groups(time, CHANGE_LEVEL, klass).p_value
    return max(p, compare_groups(cycles, CHANGE_LEVEL, klass).p_value) if cycles else p


def compare_groups(d: list[list[float]], level: float, klass: KernelClass) -> stats.Comparison:
    """Rounds within pairs of workers, pairs as a level (harness/stats.random_effects)."""
    return stats.random_effects(d, level, klass.sd_floor, klass.pair_offset_sd)


def log_ratio_groups(groups: Sequence[Sequence[tuple[Block, Block]]],
                     cycles: bool = False, by_placement: bool = False) -> list[list[float]]:
    """Each pair of workers' rounds as log ratios (of time, or of cycles: time x clock)."""
    return [_log_ratios(g, cycles, by_placement) for g in groups]


def _log_ratios(pairs: Sequence[tuple[Block, Block]], cycles: bool,
                by_placement: bool = False) -> list[float]:
    def value(b: Block) -> float:
        level = b.level(by_placement)
        return level * (b.clock() or 1.0) if cycles else level

    return [math.log(value(h) / value(b)) for b, h in pairs]


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
        return _exact(v, pairs)
    if len(pairs) < th.sequential.min_rounds:
        v.reason = f"{len(pairs)} of at least {th.sequential.min_rounds} rounds measured"
        return v
    return _tested(v, pairs, th, klass, data, upto)


def _exact(v: Verdict, pairs: Sequence[tuple[Block, Block]]) -> Verdict:
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
    return v


def _tested(v: Verdict, pairs: Sequence[tuple[Block, Block]], th: Thresholds,
            klass: KernelClass, data: CaseData, upto: int | None) -> _Tested:
    who = attribute(pairs, th)
    v.attribution = who.kind
    placed = klass.level_by_placement
    clocks = [(b.clock(), h.clock()) for b, h in pairs]
    if all(cb and ch for cb, ch in clocks):
        v.clock_base_mhz = statistics.median(cb for cb, _ in clocks)
        v.clock_head_mhz = statistics.median(ch for _, ch in clocks)
        v.cycles_ratio = math.exp(statistics.fmean(_log_ratios(pairs, True, placed)))
    energies = [(b.energy_per_call_j(placed), h.energy_per_call_j(placed)) for b, h in pairs]
    if all(eb and eh for eb, eh in energies):
        v.energy_ratio = math.exp(statistics.fmean(math.log(eh / eb) for eb, eh in energies))
        v.power_w = (statistics.median(b.power() for b, _ in pairs),
                     statistics.median(h.power() for _, h in pairs))
    limits = [blk.power_limit_w for pair in pairs for blk in pair if blk.power_limit_w]
    v.power_limit_w = min(limits) if limits else None
    groups = data.groups(upto)
    return _Tested(v, klass, log_ratio_groups(groups, by_placement=placed),
                   log_ratio_groups(groups, True, placed) if who.kind == "environment" else None)


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
    change, same = t.compare(t.time, CHANGE_LEVEL), t.compare(t.time, 1.0 - 2.0 * beta_k)
    v.p_value, v.q_value, v.look, v.ratio = change.p_value, q, look, change.ratio
    v.ci = (same.ci_low, same.ci_high)
    time_label = stats.label(change, same, q, alpha_k, k.min_ratio, k.same_ratio)
    if t.cycles is None:
        _apply(v, time_label, _code_note(v) if v.attribution == "code" else "")
        return v
    c_change, c_same = (t.compare(t.cycles, CHANGE_LEVEL),
                        t.compare(t.cycles, 1.0 - 2.0 * beta_k))
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
