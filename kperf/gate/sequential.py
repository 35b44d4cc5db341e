"""Looks, stopping and confirmation: how the gate turns rounds into final verdicts.

After every round from ``min_rounds`` on, every case still open is looked at
(``look.decide_look``) with that look's share of alpha and beta (``stats.spent``, the
power family) over at most ``max_rounds - min_rounds + 1`` looks, so the chance of a
false SLOW or FAST in a whole run stays below alpha however many looks it takes
(docs/gate.md, "Error control").
A case leaves the loop once decided. SLOW and FAST are then re-measured by a fresh pair of
worker processes, and stand only if that re-measure alone moved past the class threshold
the same way (in cycles too where the environment moved the clock) and all pairs together
still give the verdict.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kperf.gate.config import Thresholds
from kperf.gate.disturbed import judge_shared
from kperf.gate.errors import EXIT_BROKEN, EXIT_INCONCLUSIVE, EXIT_PASS, EXIT_REGRESSION
from kperf.gate.look import (
    CHANGE_LEVEL,
    case_rounds,
    claim_p,
    compare_groups,
    decide_look,
    flip,
    log_ratio_groups,
)
from kperf.gate.model import CaseData, Verdict


def key(data: CaseData | Verdict) -> tuple[str, str]:
    return (data.env, data.name if isinstance(data, CaseData) else data.case)


def last_round(cases: Sequence[CaseData]) -> int:
    return max((b.round for c in cases for b in c.blocks if not b.confirm), default=0)


def replay(cases: Sequence[CaseData], th: Thresholds) -> list[Verdict]:
    """The verdict of every case after the rounds measured so far, look by look, exactly
    as the run decided them (the same function decides during the run). Cases skipped on
    both sides (a figure a target cannot give, a case neither commit has) are left out."""
    seq = th.sequential
    final: dict[tuple[str, str], Verdict] = {}
    latest: dict[tuple[str, str], Verdict] = {}
    for upto in range(seq.min_rounds, max(last_round(cases), seq.min_rounds) + 1):
        look = min(upto - seq.min_rounds + 1, seq.looks)
        for v in decide_look([c for c in cases if key(c) not in final], th, upto, look,
                             seq.looks):
            latest[key(v)] = v
            if v.decided:
                final[key(v)] = v
    out = []
    for data in cases:
        v = final.get(key(data)) or latest[key(data)]
        if v.skipped:
            continue
        v = judge_shared(v, data)  # no verdict from rounds shared with another process
        if v.decided and v.verdict in ("SLOW", "FAST") and not _is_exact(v, th):
            v = confirm(v, data, th)
        out.append(v)
    return out


def _is_exact(v: Verdict, th: Thresholds) -> bool:
    return th.classes[v.klass].exact


def awaiting_confirmation(verdicts: Sequence[Verdict]) -> set[tuple[str, str]]:
    """Statistical SLOW / FAST verdicts waiting for their re-measure."""
    return {key(v) for v in verdicts if v.candidate and v.confirmed is None}


def confirm(v: Verdict, data: CaseData, th: Thresholds) -> Verdict:
    """A SLOW or FAST stands only if one more, fresh pair of worker processes reproduces
    it: its rounds alone move past the class threshold the same way, and every pair's
    rounds together (pairs as a level, ``look.compare_groups``) still give the verdict
    at the look that flagged it."""
    flagged = v.candidate = v.verdict
    pairs = data.pairs(confirm=True)
    if not pairs:
        v.verdict = "INCONCLUSIVE"
        v.reason = f"flagged {flagged} (x{v.ratio:.3f}), not re-measured yet" + (
            f"; {v.reason}" if v.reason else "")
        return v
    klass = th.classes[v.klass]
    placed = klass.level_by_placement
    moved = [math.exp(statistics.median(log_ratio_groups([pairs], by_placement=placed)[0]))]
    if v.attribution == "environment":
        moved.append(math.exp(statistics.median(log_ratio_groups([pairs], True, placed)[0])))
    up = 1.0 + klass.min_ratio
    raw = ("SLOW" if all(r >= up for r in moved) else
           "FAST" if all(r <= 1.0 / up for r in moved) else "")
    if not raw or flip(raw, v.higher_is_better) != flagged:
        v.confirmed, v.verdict = False, "INCONCLUSIVE"
        v.reason = (f"flagged {flagged} (x{v.ratio:.3f}) but not confirmed by fresh workers "
                    f"(re-measure alone moved " + ", ".join(f"x{r:.3f}" for r in moved) + ")")
        return v
    rounds = case_rounds(data, data.groups(confirm=None), th, placed,
                         v.attribution == "environment")
    together = compare_groups(rounds.time, CHANGE_LEVEL, klass, rounds.fitted)
    p_together = claim_p(rounds, klass)  # as every look judges it
    # At the run's alpha, not the flagging look's share of it: the look already held the
    # false-alarm rate (a candidate needs q below its share), and this check can only take
    # verdicts away. A +3.1% GEMM flagged at look 1 (share 0.00028), moved x1.034 by the
    # fresh pair, pooled p 0.0069, was lost to the stricter rule (H200, 2026-12-01,
    # docs/journal/2026-12-01.md).
    if p_together >= th.alpha:
        v.confirmed, v.verdict = False, "INCONCLUSIVE"
        v.reason = (f"flagged {flagged} (x{v.ratio:.3f}); a fresh pair of workers moved "
                    f"x{moved[0]:.3f}, but all pairs together give x{together.ratio:.3f} "
                    f"(p {p_together:.2g}, not below alpha {th.alpha:g}): the pairs of "
                    f"processes disagree too much to tell the change from their offsets")
        return v
    v.confirmed = True
    return v


def finalise(verdicts: Sequence[Verdict], stopped: str) -> list[Verdict]:
    """Cases still open when the loop ended are INCONCLUSIVE, saying why it ended."""
    for v in verdicts:
        if not v.decided:
            v.verdict = "INCONCLUSIVE"
            v.reason = f"{stopped}; {v.reason}" if v.reason else stopped
    return list(verdicts)


def exit_code(verdicts: Sequence[Verdict]) -> int:
    """2 broken, else 1 regression, else 3 inconclusive, else 0 (docs/gate.md)."""
    if any(v.broke for v in verdicts):
        return EXIT_BROKEN
    if any(v.verdict == "SLOW" for v in verdicts):
        return EXIT_REGRESSION
    if any(v.verdict == "INCONCLUSIVE" for v in verdicts):
        return EXIT_INCONCLUSIVE
    return EXIT_PASS
