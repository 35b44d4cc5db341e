"""The gate's looks and its re-measure (kperf/gate/sequential.py): a decided case keeps its
verdict, and a flagged one stands only where fresh pairs of workers confirm it, in time
and in cycles. Each test names the rule it guards; removing the rule fails it."""

from __future__ import annotations

import math
from pathlib import Path

from kperf.gate.look import decide_look
from kperf.gate.model import CaseData, Verdict
from kperf.gate.sequential import confirm, replay
from tests._gate import GEMM, NORM, block, case, one

from .conftest import synthetic_thresholds

REPO = Path(__file__).resolve().parent.parent


def test_a_decided_case_keeps_its_verdict_whatever_comes_after(th) -> None:
    data = case(GEMM, [1.0] * 3, [1.0] * 3)
    assert replay([data], th)[0].verdict == "SAME"
    data.blocks += [block("base", 4, 1.0), block("head", 4, 1.5)]  # never measured live
    v = replay([data], th)[0]
    assert v.verdict == "SAME" and v.look == 1 and v.rounds == 3


def test_flagged_cases_stand_only_if_the_remeasure_alone_moved(th) -> None:
    data = case(GEMM, [1.0, 1.0, 1.0], [1.04, 1.042, 1.038])
    waiting = replay([data], th)[0]
    assert waiting.candidate == "SLOW" and waiting.confirmed is None
    assert waiting.verdict == "INCONCLUSIVE" and "not re-measured" in waiting.reason
    kept = case(GEMM, [1.0, 1.0, 1.0], [1.04, 1.042, 1.038])
    kept.blocks += [block("base", 4, 1.0, confirm=True), block("head", 4, 1.041, confirm=True)]
    assert replay([kept], th)[0].verdict == "SLOW" and replay([kept], th)[0].confirmed
    lost = case(GEMM, [1.0] * 6, [1.04, 1.045, 1.035, 1.042, 1.038, 1.04])
    lost.blocks += [block("base", 7, 1.0, confirm=True), block("head", 7, 1.012, confirm=True)]
    v = replay([lost], th)[0]
    assert v.candidate == "SLOW" and v.verdict == "INCONCLUSIVE" and v.confirmed is False, v
    assert "not confirmed by fresh workers" in v.reason and "x1.012" in v.reason


def test_pairs_of_workers_are_the_replicates_not_the_rounds_of_one_pair(th) -> None:
    """An A/A on an H200 (2026-12-01): a bandwidth-bound kernel 2.5% apart in every one of four
    rounds of one pair of worker processes, 0.8% in a fresh pair. One pair's rounds make
    it look certain; the pairs show it is where the processes landed: no verdict."""
    data = case(NORM, [1.0] * 4, [0.9757, 0.9744, 0.9741, 0.9749], clock=1980.0, bits=0,
                power=450.0, generation=0)
    first = replay([data], th)[0]
    assert first.candidate == "FAST", "one pair alone: flagged"
    data.blocks += [block("base", 5, 1.0, confirm=True, clock=1980.0, bits=0, power=450.0),
                    block("head", 5, 0.9925, confirm=True, clock=1980.0, bits=0, power=450.0)]
    v = replay([data], th)[0]
    assert v.verdict == "INCONCLUSIVE" and v.confirmed is False, v
    assert "disagree too much" in v.reason


def test_a_change_every_pair_shows_is_confirmed_though_pairs_differ_by_1pct(th) -> None:
    """The injected +3.1% GEMM (bf16) on the H200 (2026-12-01, docs/journal/2026-12-01.md): three
    new pairs read +2.02, +2.02, +2.21% and were flagged at look 1; the fresh pair read +3.13 and
    +3.53%. All pairs together give p ~0.007: real, but not below the 0.00028 of alpha that
    look 1 may spend. The pooled check is held at the run's alpha, so it stands."""
    data = case(GEMM, [1.0] * 3, [1.0204, 1.0204, 1.0223], clock=1462.0)
    first = replay([data], th)[0]
    assert first.candidate == "SLOW" and first.look == 1, first
    data.blocks += [block("base", 4, 1.0, confirm=True, generation=9, clock=1462.0),
                    block("head", 4, 1.0318, confirm=True, generation=9, clock=1462.0),
                    block("base", 5, 1.0, confirm=True, generation=9, clock=1462.0),
                    block("head", 5, 1.0359, confirm=True, generation=9, clock=1462.0)]
    v = replay([data], th)[0]
    assert v.verdict == "SLOW" and v.confirmed is True, v


def test_one_pair_cannot_claim_more_precision_than_pairs_have(th) -> None:
    """Twelve rounds agreeing to 0.02% inside one pair of workers, 0.3% apart: the
    interval still carries the spread of pairs measured on the hardware (pair_offset_sd),
    so this is not a 0.3% change, and its interval reaches past 0.5% (SAME only because
    the bandwidth class's band is 0.75%, thresholds.json ``same_ratio``)."""
    one_pair = case(NORM, [1.0] * 12, [1.003 + 0.0002 * (k % 2) for k in range(12)],
                    clock=1980.0, bits=0, power=450.0, generation=0)
    v = one(decide_look([one_pair], th, None, 1, 1), NORM)
    floor = th.classes["bandwidth"].pair_offset_sd  # at least a 90% interval of the floor
    assert math.log(v.ci[1] / v.ci[0]) > 2 * 1.6 * floor and v.ci[1] > 1.005, v
    assert v.verdict == "SAME" and th.classes["bandwidth"].same_ratio == 0.0075, v


def test_confirm_checks_cycles_where_the_environment_moved_the_clock(th) -> None:
    v = Verdict(GEMM, "", "compute", "SLOW", attribution="environment", ratio=1.05)
    data = CaseData(GEMM, blocks=[block("base", 9, 1.0, clock=1420.0, confirm=True),
                                  block("head", 9, 1.05, clock=1352.0, confirm=True)])
    out = confirm(v, data, synthetic_thresholds())
    assert out.verdict == "INCONCLUSIVE" and out.confirmed is False


def test_all_pairs_together_must_hold_in_cycles_too_where_the_environment_moved_it(th):
    """Flagged SLOW with the clock moved from outside; the re-measure alone moved 5% in time
    and in cycles, but over all pairs the cycles did not move (the first rounds' head ran
    5% slower at a 5% lower clock): as at every look, time alone cannot claim it."""
    v = Verdict(GEMM, "", "compute", "SLOW", attribution="environment", ratio=1.05, look=1)
    data = case(GEMM, [1.0] * 4, [1.05, 1.051, 1.049, 1.05], clock=(1420.0, 1352.0))
    data.blocks += [block("base", 5, 1.0, confirm=True), block("head", 5, 1.05, confirm=True)]
    out = confirm(v, data, th)
    assert out.verdict == "INCONCLUSIVE" and out.confirmed is False, out
    assert "all pairs together" in out.reason
