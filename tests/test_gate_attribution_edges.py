"""Whose is a clock gap (kperf/gate/model.py ``attribute``: nobody's, the code's or the
environment's) at its edges, written for the survivors of mutmut over the module
(docs/reliability.md, "mutmut"): a side without clock readings, a gap exactly at the
tolerance, and the rounds the code's attribution needs."""

from __future__ import annotations

from kperf.gate.model import attribute
from tests._gate import GEMM, case


def test_without_a_clock_reading_the_gap_is_nobodys(th) -> None:
    for clocks in ((None, 1340.0), (1420.0, None)):
        data = case(GEMM, [1.0] * 4, [1.06] * 4, clock=clocks)
        who = attribute(data.pairs(), th)
        assert (who.kind, who.why) == ("none", "no clock readings")
    assert attribute([], th).kind == "none"


def test_a_gap_inside_the_tolerance_is_nobodys_and_past_it_the_codes(th) -> None:
    """Both sides at the limit, the head's clock lower (or higher) in every round."""
    base, tol = 1000.0, th.clock_tolerance
    for factor in (1 / (1 + 0.99 * tol), 1 + 0.99 * tol):
        inside = case(GEMM, [1.0] * 4, [1.0] * 4, clock=(base, base * factor))
        assert attribute(inside.pairs(), th).kind == "none", factor
    for factor in (1 / (1 + 1.01 * tol), 1 + 1.01 * tol):
        past = case(GEMM, [1.0] * 4, [1.0] * 4, clock=(base, base * factor))
        who = attribute(past.pairs(), th)
        assert (who.kind, who.why) == ("code", "the clock follows the side at the power "
                                               "limit"), factor


def test_the_codes_clock_needs_three_rounds_by_default(th) -> None:
    three = case(GEMM, [1.0] * 3, [1.05] * 3, clock=(1420.0, 1340.0))
    assert attribute(three.pairs(), th).kind == "code"
    two = case(GEMM, [1.0] * 2, [1.05] * 2, clock=(1420.0, 1340.0))
    assert attribute(two.pairs(), th).kind == "environment"
    assert attribute(two.pairs(), th, min_pairs=2).kind == "code"
