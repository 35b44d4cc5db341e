"""The gate's verdict model at one look, on blocks whose truth is known: time and cycles,
who moved the clock, the suite-wide correction, the class thresholds, exact figures, the
exit code, and the class a case held at the power cap is judged by. Each test names the
rule it guards; removing the rule fails it."""

from __future__ import annotations

import pytest

from kperf.gate import report
from kperf.gate.errors import EXIT_BROKEN, EXIT_INCONCLUSIVE, EXIT_PASS, EXIT_REGRESSION
from kperf.gate.look import decide_look
from kperf.gate.model import Block, CaseData, Verdict, attribute
from kperf.gate.sequential import exit_code, replay
from tests._gate import GEMM, NORM, block, case, noisy, one

# --------------------------------------------------------------------------- decisions


def test_a_clear_regression_is_slow_and_an_unchanged_case_same(th) -> None:
    slow = case(GEMM, noisy(1.0, 6, 0.002, 1), noisy(1.04, 6, 0.002, 2))
    same = case(NORM, noisy(1.0, 12, 0.0005, 3), noisy(1.0, 12, 0.0005, 4), clock=1980.0,
                power=450.0, bits=0)
    verdicts = decide_look([slow, same], th, None, 1, th.sequential.looks)
    assert one(verdicts, GEMM).verdict == "SLOW" and one(verdicts, GEMM).decided
    assert one(verdicts, NORM).verdict == "SAME"
    assert one(verdicts, GEMM).ratio == pytest.approx(1.04, rel=0.005)


def test_rounds_are_the_replicates_not_the_samples(th) -> None:
    """Tight samples inside each block, but rounds that disagree by +-3%: the interval is
    the rounds', so the case is undecided, never SLOW on the blocks' own tightness."""
    base, head = [1.0] * 4, [1.03, 0.99, 1.035, 0.985]
    v = one(decide_look([case(GEMM, base, head)], th, None, 1, th.sequential.looks), GEMM)
    assert not v.decided and v.verdict == "INCONCLUSIVE", v
    assert v.ci[1] - v.ci[0] > 0.03, "the interval must carry the round-to-round spread"


def test_the_suite_wide_correction_applies(th) -> None:
    """One case whose p-value passes the look's alpha alone but not after Benjamini-
    Hochberg over 20 cases is not SLOW (at the last look, which spends the most)."""
    d_base = [1.0] * 6
    d_head = [1.02, 1.03, 1.015, 1.028, 1.018, 1.035]  # p 6e-4: below alpha_k, not below it/20
    cases = [case(GEMM, d_base, d_head)]
    cases += [case(f"{GEMM[:-1]}, {i})", d_base, noisy(1.0, 6, 0.004, 10 + i))
              for i in range(19)]
    looks = th.sequential.looks
    alone = one(decide_look(cases[:1], th, None, looks, looks), GEMM)
    together = one(decide_look(cases, th, None, looks, looks), GEMM)
    assert alone.verdict == "SLOW", alone
    assert together.verdict != "SLOW" and together.q_value > alone.q_value, together


def test_each_look_spends_only_its_share_of_alpha(th) -> None:
    looks = th.sequential.looks
    assert looks > 1
    d_head = [1.021, 1.027, 1.018, 1.024]  # p 1.3e-3: below alpha, above look 1's share
    strict = decide_look([case(GEMM, [1.0] * 4, d_head)], th, None, 1, looks)
    loose = decide_look([case(GEMM, [1.0] * 4, d_head)], th, None, 1, 1)
    assert one(strict, GEMM).p_value == one(loose, GEMM).p_value
    assert one(loose, GEMM).verdict == "SLOW" and one(strict, GEMM).verdict != "SLOW"


def test_environment_clock_gap_needs_the_cycles_to_agree(th) -> None:
    """Thermal bits and a head 5% slower at a 5% lower clock: the same cycles. The case's
    p-value is the larger of time's and cycles': not SLOW."""
    data = case(GEMM, [1.0] * 4, [1.0526, 1.0522, 1.053, 1.0528],
                clock=(1420.0, 1349.0), bits=(0x4, 0x4 | 0x20))
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.attribution == "environment" and "0x20" in attribute(data.pairs(), th).why
    assert v.verdict != "SLOW", v
    assert v.cycles_ratio == pytest.approx(1.0, abs=0.002)
    assert "from outside" in v.reason


def test_the_cycles_p_value_counts_where_the_environment_moved_the_clock(th) -> None:
    """Heat on the head: time +5% in every round, cycles +2% on average but all over the
    place. Both point the same way, but only time is significant: not SLOW."""
    times = [1.05, 1.052, 1.048, 1.051, 1.05, 1.049]
    cycles = [1.00, 1.045, 0.99, 1.05, 1.0, 1.04]
    clocks = [(1420.0, 1420.0 * c / t) for c, t in zip(cycles, times, strict=True)]
    data = case(GEMM, [1.0] * 6, times, clock=clocks, bits=(0x4, 0x4 | 0x40))
    v = one(decide_look([data], th, None, 1, 1), GEMM)
    assert v.attribution == "environment" and v.cycles_ratio > 1.015
    assert v.verdict != "SLOW", v
    assert v.p_value < th.alpha, "time alone is significant: the cycles' p-value decides"


def test_a_clock_the_code_lowered_at_the_power_limit_is_slow_with_why(th) -> None:
    """Both sides at the 700 W limit, the head's clock lower in every round: the code's
    doing. Time decides, and the reason gives energy, clocks and the cycles ratio."""
    data = case(GEMM, [1.771, 1.775, 1.778, 1.772], [1.880, 1.892, 1.885, 1.889],
                clock=[(1425.0, 1340.0), (1421.0, 1334.0), (1424.0, 1336.0), (1422.0, 1337.0)],
                power=(692.0, 693.0))
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.attribution == "code" and v.verdict == "SLOW", v
    assert "energy per call +6." in v.reason and "700 W power limit" in v.reason
    assert "1423 → 1336 MHz" in v.reason and "at equal clocks x0.99" in v.reason


def test_a_clock_that_follows_the_round_is_the_environments(th) -> None:
    clocks = [(1420.0, 1300.0), (1300.0, 1420.0), (1420.0, 1300.0), (1420.0, 1300.0)]
    data = case(GEMM, [1.0] * 4, [1.09, 0.92, 1.09, 1.09], clock=clocks)
    assert attribute(data.pairs(), th).kind == "environment"
    assert "follows the round" in attribute(data.pairs(), th).why


def test_below_the_power_limit_a_lower_clock_is_not_the_codes(th) -> None:
    data = case(GEMM, [1.0] * 4, [1.2] * 4, clock=(1980.0, 1650.0), power=(400.0, 330.0),
                bits=0)
    assert attribute(data.pairs(), th).kind == "environment"
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.verdict != "SLOW" and v.cycles_ratio == pytest.approx(1.0, abs=0.001)


def test_one_side_at_the_power_limit_is_not_enough_for_the_codes_clock(th) -> None:
    """Base at the 700 W limit (cap bit), head at 500 W without it, the head's clock
    lower in every round: the code can only own a clock gap when both sides run at the
    limit (the power controller then sets the clock by the work's energy)."""
    data = case(GEMM, [1.0] * 4, [1.06] * 4, clock=(1420.0, 1340.0), power=(690.0, 500.0),
                bits=(0x4, 0))
    who = attribute(data.pairs(), th)
    assert (who.kind, who.why) == ("environment", "not at the power limit on both sides")


def test_where_heat_moved_the_clock_same_needs_the_cycles_too(th) -> None:
    """Thermal bits at head, time the same to 0.05% in every round, the head's clock
    +3-9% round to round: time alone says SAME, cycles cannot say anything yet. A verdict
    where the environment moved the clock must hold in both; this one is not decided."""
    head = [1.0005, 0.9995, 1.0, 1.0004, 0.9996, 1.0]
    clocks = [(1420.0, 1420.0 * f) for f in (1.03, 1.09, 1.04, 1.08, 1.03, 1.09)]
    data = case(GEMM, [1.0] * 6, head, clock=clocks, bits=(0x4, 0x4 | 0x20))
    v = one(decide_look([data], th, None, th.sequential.looks, th.sequential.looks), GEMM)
    assert v.attribution == "environment" and v.ci[0] > 1 / 1.015 and v.ci[1] < 1.015, v
    assert not v.decided and "not decided in both time and cycles" in v.reason, v


def test_a_significant_change_below_the_class_threshold_is_not_slow(th) -> None:
    """+0.8% in every round, to 0.01%: beyond doubt, but below the compute class's 1.5%
    smallest change that matters: never SLOW (here SAME: its interval is in the band)."""
    head = [1.008 + 0.0001 * (k % 3) for k in range(8)]
    v = one(decide_look([case(GEMM, [1.0] * 8, head)], th, None, 1, 1), GEMM)
    assert v.p_value < 1e-6 and v.ratio == pytest.approx(1.009, abs=0.002)
    assert v.verdict == "SAME", v


def test_a_static_figure_is_never_judged_as_the_cap_class(th) -> None:
    """Whatever share of its blocks ran at the power cap, an exact class stays exact."""
    static = th.classes["static"]
    assert th.class_at_cap(static, 1.0) is static
    assert th.class_at_cap(th.classes["bandwidth"], 1.0).name == th.at_cap_class


def test_static_figures_are_exact_and_occupancy_higher_is_better(th) -> None:
    regs = CaseData("bench_gemm.GemmRegisters.track_value('sm_90a', 'fp16', 'triton')",
                    unit="registers", blocks=[Block("base", 1, value=168.0),
                                             Block("head", 1, value=170.0)])
    occ = CaseData("bench_gemm.GemmOccupancy.track_value('sm_90a', 'fp16', 'triton')",
                   unit="waves", blocks=[Block("base", 1, value=1.0), Block("head", 1, value=2.0)])
    verdicts = replay([regs, occ], th)
    assert [v.verdict for v in verdicts] == ["SLOW", "FAST"]
    assert all(v.confirmed is None for v in verdicts), "exact figures are not re-measured"


def test_failures_and_skips(th) -> None:
    broken = CaseData(GEMM, blocks=[block("base", 1, 1.0),
                                    Block("head", 1, "failed", "RemoteError: NaN in output")])
    new = CaseData(NORM, blocks=[Block("base", 1, "skipped", "RemoteSkip: no such case"),
                                 block("head", 1, 1.0)])
    verdicts = replay([broken, new], th)
    assert one(verdicts, GEMM).broke and "NaN in output" in one(verdicts, GEMM).reason
    assert one(verdicts, NORM).reason.startswith("skipped at base")
    assert exit_code(verdicts) == EXIT_BROKEN


def test_exit_code_precedence() -> None:
    def v(verdict: str, broke: bool = False) -> Verdict:
        return Verdict("c", "", "compute", verdict, broke=broke)

    assert exit_code([v("SLOW"), v("INCONCLUSIVE", broke=True)]) == EXIT_BROKEN
    assert exit_code([v("SLOW"), v("INCONCLUSIVE")]) == EXIT_REGRESSION
    assert exit_code([v("SAME"), v("INCONCLUSIVE")]) == EXIT_INCONCLUSIVE
    assert exit_code([v("SAME"), v("FAST")]) == EXIT_PASS


# --------------------------------------------------------------------------- the power cap


def test_at_the_power_cap_a_block_is_its_trials_mean_elsewhere_their_median() -> None:
    """The trials of one softmax block at 700 W on an H200 (%, docs/journal/2026-12-01.md 'Before
    midnight'): the clock's cycle puts two slow peaks in 15 trials, which the median
    ignores and the user's time average does not."""
    trials = [1 + p / 100 for p in (-0.6, -1.1, -1.5, -0.3, 1.9, 8.0, 6.1, 3.5, 0.3, 0.0,
                                    -0.5, -1.0, -0.4, 2.8, 5.1)]
    capped = Block("base", 1, samples=trials, clocks=[1900.0, 1700.0], at_cap=True)
    free = Block("base", 1, samples=trials, clocks=[1900.0, 1700.0], at_cap=False)
    assert capped.level() == pytest.approx(sum(trials) / len(trials))
    assert free.level() == sorted(trials)[7] < capped.level()
    assert (capped.clock(), free.clock()) == (1800.0, 1800.0)
    old = Block("base", 1, samples=[1.0, 1.0, 5.0])  # a record from before at_cap: median
    assert old.level() == 1.0


def test_a_case_the_power_controller_held_down_is_judged_as_the_cap_class(th) -> None:
    """Softmax is bandwidth-bound (0.5%), but at the cap its rounds scatter like a
    GEMM's: judged as compute there, and the report says so. Power near the limit without
    the cap bit (a block after a GEMM reads the board's average high) is not the cap."""
    assert th.classes["compute"].min_ratio > th.classes["bandwidth"].min_ratio
    ratios = [1.008, 0.992, 1.009, 0.993, 1.008, 0.992, 1.007, 0.993]
    capped = case(NORM, [1.0] * 8, ratios, clock=1800.0, power=695.0, bits=0x4)
    near = case(NORM, [1.0] * 8, ratios, clock=1980.0, power=685.0, bits=0)
    v_capped = one(decide_look([capped], th, None, th.sequential.looks,
                               th.sequential.looks), NORM)
    v_near = one(decide_look([near], th, None, th.sequential.looks, th.sequential.looks), NORM)
    assert (v_capped.klass, v_capped.rule_class, v_capped.verdict) == (
        "compute", "bandwidth", "SAME")
    assert "at the power cap: judged as compute" in report.fmt_verdict(v_capped)
    assert (v_near.klass, v_near.rule_class, v_near.verdict) == ("bandwidth", "", "INCONCLUSIVE")
    decode = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'triton')"
    v_decode = one(decide_look([case(decode, [1.0] * 8, ratios, bits=0x4)], th, None, 1,
                               th.sequential.looks), decode)
    assert v_decode.klass == "decode"  # a wider class stays as it is


@pytest.mark.parametrize(("capped_rounds", "klass"), [(6, "compute"), (4, "bandwidth")])
def test_the_cap_class_needs_most_blocks_capped_not_all(th, capped_rounds: int,
                                                        klass: str) -> None:
    """75% of a bandwidth case's blocks held down by the power controller: judged as
    compute; 50%: bandwidth still (thresholds.json ``at_cap_class``, "mostly")."""
    ratios = [1.0] * 8
    bits = [0x4 if r < capped_rounds else 0 for r in range(8)]
    data = case(NORM, [1.0] * 8, ratios, clock=1800.0, power=695.0, bits=bits)
    assert data.capped_share(th) == capped_rounds / 8
    v = one(decide_look([data], th, None, 1, th.sequential.looks), NORM)
    assert v.klass == klass and v.rule_class == ("bandwidth" if klass == "compute" else "")
