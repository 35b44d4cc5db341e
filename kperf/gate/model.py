"""The verdict model: blocks, cases and verdicts, and whose a clock gap is (pure).

A **block** is one side's measurement of one case in one round (warm-up, then a few
trials, each with the telemetry of its window). Base and head are measured next to each
other in every round, their order alternating, so a round's log ratio is the replicate
(kperf/core/stats.py). The gate looks after every round from ``min_rounds`` on
(kperf/gate/look.py); a case stops being measured once it is SLOW, FAST or SAME, or its
budget is spent. The same replay of looks decides a stored run again (``--no-run``), so a
verdict can always be checked.

Clock differences are judged by their cause (``attribute``): at the power limit, with no
thermal or hardware-slowdown bits, a clock gap that follows the side in every round is
the code's doing (it spends more energy per call, so the power controller lowers its
clock): the verdict follows time and the reason says why. Otherwise the gap is the
environment's, and a change must also hold in cycles (time x clock).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kperf.gate.config import Thresholds

SIDES = ("base", "head")
# Placed copies whose medians lie this far apart (the largest step between sorted copies)
# are two modes of the kernel: where its inputs lie, not noise (a decode GEMM's copies read
# ~88 or ~101 us, nothing between: docs/journal/2026-12-03.md).
MODE_GAP = 0.05


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
    reps_queued: list[float | None] = field(default_factory=list)  # per trial: kperf/core/timing.py
    input_set_medians_s: list[float] = field(default_factory=list)  # per placed copy: timing.py
    rep_hold_s: float | None = None  # the hold before each rep (kperf/core/reps.py; None: unknown)
    trials_retaken: int | None = None  # trials taken again, the host behind (kperf/core/timing.py)
    t: float | None = None  # when it was recorded (s since the epoch): which side went first
    method: str | None = None  # how it was timed: "graph" | "events" (kperf/core/timing.py)
    # a static figure's block: every figure of its kernel's code (registers, LDS,
    # occupancy and its limit, ``code_sha``) and the tile ``config`` it was built with
    figures: dict[str, Any] | None = None
    # the other processes on the GPU in its trials (kperf/core/telemetry/processes.py: pid,
    # name, used_mb, trials); None: not known (no process list, blocks of before)
    processes: list[dict[str, Any]] | None = None

    def first_in(self, other: Block) -> bool | None:
        """Whether it was measured before ``other`` (None where a time is unknown)."""
        return None if self.t is None or other.t is None else self.t < other.t

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


def copy_modes(copies: Sequence[float]) -> list[tuple[float, int]]:
    """(median, count) of each mode of a block's placed copies, lowest first: two where the
    largest step between sorted copies is at least ``MODE_GAP``, else one."""
    ordered = sorted(copies)
    if len(ordered) > 1:
        cut = max(range(1, len(ordered)), key=lambda i: ordered[i] / ordered[i - 1])
        if ordered[cut] / ordered[cut - 1] - 1.0 >= MODE_GAP:
            low, high = ordered[:cut], ordered[cut:]
            return [(statistics.median(low), len(low)), (statistics.median(high), len(high))]
    return [(statistics.median(ordered), len(ordered))]


def side_modes(pairs: Sequence[tuple[Block, Block]]) -> tuple[list[float], list[float]] | None:
    """Each side's two mode levels from all its blocks' copies pooled, where both sides
    have two; else None."""
    pooled = ([c for b, _ in pairs for c in b.input_set_medians_s],
              [c for _, h in pairs for c in h.input_set_medians_s])
    modes = [copy_modes(copies) for copies in pooled if copies]
    if len(modes) < 2 or any(len(m) != 2 for m in modes):
        return None
    return [level for level, _ in modes[0]], [level for level, _ in modes[1]]


def _block_modes(block: Block, side_levels: list[float] | None) -> dict[int, tuple[float, int]]:
    """A block's modes by index (0 the fast one): a lone mode takes the index of its own
    side's nearer mode, which it is (the same code, the same levels)."""
    modes = copy_modes(block.input_set_medians_s)
    if len(modes) == 2:
        return dict(enumerate(modes))
    if side_levels is None:
        return {}
    level = modes[0][0]
    return {min((0, 1), key=lambda i: abs(math.log(level / side_levels[i]))): modes[0]}


def placed_log_ratio(base: Block, head: Block,
                     sides: tuple[list[float], list[float]] | None = None) -> float:
    """log(head / base) of a round of a class judged by placement, mode by mode. How many
    of a block's copies land in a kernel's fast places is a draw (0 to 4 of 16 a block on an
    H200; the copies' mean then moved 1.8% a round, sd, against 0.3% mode by mode:
    docs/journal/2026-12-03.md, "Late night"), while a change of code moves every mode.
    The modes both blocks have are compared (weighted by the copies behind the smaller
    side). A block of one mode is placed among its own side's modes (``sides``, from
    ``side_modes``), never among the other side's: a lone mode at 90.9 us against 88 and
    101 us is the fast one 3% slower or the slow one 10% faster. Blocks of one mode each,
    not the same one, are compared through the base's distance between its modes. Without
    ``sides`` (a side that never showed two modes), a block of one mode is compared by the
    copies' means."""
    def mean_ratio() -> float:
        return math.log(head.level(True) / base.level(True))

    if len(base.input_set_medians_s) < 2 or len(head.input_set_medians_s) < 2:
        return mean_ratio()
    b_modes = _block_modes(base, sides[0] if sides else None)
    h_modes = _block_modes(head, sides[1] if sides else None)
    common = sorted(set(b_modes) & set(h_modes))
    if not common and sides and b_modes and h_modes:
        # one mode each, not the same: the base's level at the head's mode, by the base's
        # own distance between its modes
        (j, (b_level, _)), (i, (h_level, _)) = min(b_modes.items()), min(h_modes.items())
        return math.log(h_level / b_level) - math.log(sides[0][i] / sides[0][j])
    if not common:
        return mean_ratio()
    weights = [min(b_modes[i][1], h_modes[i][1]) for i in common]
    logs = [math.log(h_modes[i][0] / b_modes[i][0]) for i in common]
    return sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)


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
    # (base, head) where the sides timed the kernel by different methods (``side_methods``)
    methods: tuple[str, str] | None = None
    # other processes that used the GPU in its blocks (kperf/gate/disturbed.py judge_shared:
    # pid, name, used_mb, rounds, blocks); where they stayed, ``attribution`` is "process"
    processes: list[dict[str, Any]] = field(default_factory=list)

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


METHOD_NAMES = {"graph": "graph replay", "events": "events around one call",
                "mixed": "both methods"}


def one_method(methods: Iterable[str | None]) -> str | None:
    """The timing method of several measurements: theirs where they agree, "mixed" where
    they differ, None where none says."""
    known = {m for m in methods if m}
    return known.pop() if len(known) == 1 else ("mixed" if known else None)


def method_note(before: str, after: str, sides: tuple[str, str], what: str) -> str:
    """``timed by graph replay at base, events around one call at head: part of the change
    is the method's`` (the gate's reason, ``sides`` "at base"/"at head"; the site's step
    line, "before"/"after")."""
    named = [METHOD_NAMES.get(m, m) for m in (before, after)]
    return (f"timed by {named[0]} {sides[0]}, {named[1]} {sides[1]}: part of the {what} is "
            f"the method's")


def side_methods(pairs: Sequence[tuple[Block, Block]]) -> tuple[str, str] | None:
    """(base, head) timing methods where they differ ("mixed": a side's blocks differ
    among themselves); None where they agree or a side's is unknown. A call timed alone
    after an L2 flush reads otherwise than calls replayed back to back (docs/site.md, "The
    cause of a step"), so a kernel that crossed ``Plan.graph_below_s`` changes with its
    method too."""
    sides = [one_method(blk.method for blk in side) for side in zip(*pairs, strict=True)]
    if len(sides) != 2 or not all(sides):
        return None
    base, head = sides
    return (base, head) if base != head or base == "mixed" else None


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def attribute(pairs: Sequence[tuple[Block, Block]], th: Thresholds,
              min_pairs: int = 3) -> Attribution:
    """Whose is a clock gap between the sides: nobody's (none), the code's or the
    environment's (docs/gate.md, "Clocks"). The code's needs the gap's sign in
    ``side_share`` of at least ``min_pairs`` pairs: the gate's rounds, 3 at least; the
    history's runs either side of a step (kperf/site/steps.py), often one each."""
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
