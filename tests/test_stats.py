"""kperf.core.stats on rounds whose truth is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from kperf.core import stats


def _log_ratios(ratio: float, sd: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(math.log(ratio) + sd * rng.standard_normal(n))


def test_a_shift_is_significant_and_the_interval_holds_the_true_ratio() -> None:
    c = stats.random_effects([_log_ratios(1.05, 0.01, 12, 1)], 0.99)
    assert c.p_value < 1e-6 and c.n == 12
    assert c.ci_low < 1.05 < c.ci_high and c.ci_low > 1.0


def test_the_interval_matches_a_t_interval_and_its_level() -> None:
    d = _log_ratios(1.0, 0.01, 8, 2)
    c90, c99 = stats.random_effects([d], 0.90), stats.random_effects([d], 0.99)
    lo, hi = sps.t.interval(0.90, 7, loc=np.mean(d), scale=np.std(d, ddof=1) / math.sqrt(8))
    assert (c90.ci_low, c90.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)))
    assert c99.ci_low < c90.ci_low and c99.ci_high > c90.ci_high
    assert c90.p_value == c99.p_value == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue)


def test_the_floor_keeps_lucky_rounds_from_claiming_precision() -> None:
    d = [0.02, 0.0201, 0.0199]  # three rounds agreeing to 0.01%
    free, floored = stats.random_effects([d], 0.99), stats.random_effects([d], 0.99, 0.01)
    assert floored.ci_high - floored.ci_low > 10 * (free.ci_high - free.ci_low)
    assert floored.p_value > free.p_value and floored.sd == free.sd


def test_spending_splits_alpha_evenly_over_looks() -> None:
    assert sum(stats.spent(0.01, k, 10) for k in range(1, 11)) == pytest.approx(0.01)
    assert stats.spent(0.01, 3, 10) == pytest.approx(0.001)
    with pytest.raises(ValueError):
        stats.spent(0.01, 11, 10)


def test_power_spending_keeps_more_for_late_looks_and_never_more_than_alpha() -> None:
    shares = [stats.spent(0.01, k, 10, 2.0) for k in range(1, 11)]
    assert sum(shares) == pytest.approx(0.01)
    assert shares == sorted(shares) and shares[0] == pytest.approx(0.0001)
    assert shares[-1] == pytest.approx(0.01 * (1 - 0.81))
    with pytest.raises(ValueError, match="power"):
        stats.spent(0.01, 1, 10, 0.0)


def test_benjamini_hochberg_against_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert stats.benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert stats.benjamini_hochberg([]) == []


def test_holm_against_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_bh_keeps_suite_wide_false_alarms_rare_under_the_complete_null() -> None:
    rng = np.random.default_rng(7)
    suites_with_alarm = 0
    for _ in range(2000):
        p = rng.uniform(size=30)
        suites_with_alarm += min(stats.benjamini_hochberg(p)) < 0.05
    assert suites_with_alarm / 2000 < 0.07


def test_label_needs_significance_magnitude_and_a_narrow_band_for_same() -> None:
    def cmp(ratio: float, lo: float, hi: float) -> stats.Comparison:
        return stats.Comparison(6, ratio, lo, hi, 1e-9, 0.01)

    wide, narrow = cmp(1.0, 0.9, 1.1), cmp(1.0, 0.99, 1.01)
    assert stats.label(cmp(1.10, 1.07, 1.13), wide, 1e-6, 0.01, 0.05) == "SLOW"
    assert stats.label(cmp(1.10, 1.07, 1.13), wide, 0.2, 0.01, 0.05) == "NOISY"  # not significant
    assert stats.label(cmp(1.03, 1.02, 1.04), narrow, 1e-6, 0.01, 0.05) == "SAME"  # too small
    assert stats.label(cmp(0.90, 0.88, 0.93), wide, 1e-6, 0.01, 0.05) == "FAST"
    assert stats.label(cmp(1.00, 0.90, 1.12), wide, 0.5, 0.01, 0.05) == "NOISY"  # too wide


def test_one_round_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 rounds"):
        stats.random_effects([[0.01]], 0.99)
    with pytest.raises(ValueError, match="at least 2 rounds"):
        stats.random_effects([[0.01], []], 0.99)


def test_random_effects_is_the_paired_t_with_one_pair_and_no_floor() -> None:
    d = _log_ratios(1.01, 0.004, 7, 3)
    one = stats.random_effects([d], 0.99)
    lo, hi = sps.t.interval(0.99, 6, loc=np.mean(d), scale=np.std(d, ddof=1) / math.sqrt(7))
    assert one.p_value == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue)
    assert (one.ci_low, one.ci_high) == pytest.approx((math.exp(lo), math.exp(hi)))


def test_pairs_that_disagree_widen_the_interval_beyond_their_rounds() -> None:
    """Two pairs of worker processes, each sure of itself (rounds within 0.05%), 1.7%
    apart: the mean is uncertain by the pairs' spread, not by the rounds'."""
    first = _log_ratios(0.975, 0.0005, 4, 4)
    second = _log_ratios(0.992, 0.0005, 2, 5)
    pooled = stats.random_effects([first + second], 0.99)  # as if one pair measured all
    one = stats.random_effects([first], 0.99)  # the first pair's rounds alone
    grouped = stats.random_effects([first, second], 0.99, 0.0005, 0.005)
    assert grouped.ci_high - grouped.ci_low > 10 * (one.ci_high - one.ci_low)
    assert grouped.ci_low < 1.0 < grouped.ci_high
    assert grouped.p_value > 0.01 > pooled.p_value


def test_the_floor_of_the_pairs_spread_holds_for_one_pair() -> None:
    d = [0.003, 0.0031, 0.0029, 0.003]  # one pair, 0.3% apart, rounds agreeing to 0.01%
    c = stats.random_effects([d], 0.99, 0.0005, 0.005)
    assert c.ci_low < 1.0 < c.ci_high, "0.3% is inside what pairs of processes differ by"


def test_a_second_pair_that_agrees_never_makes_a_change_undecidable() -> None:
    """A cold compile twice as slow, its rounds by one pair of workers and its re-measure
    by a fresh pair, the two 3% apart (each round within 1%): decided at alpha 0.01, as the
    first pair alone is. With the pairs' spread's one degree of freedom as the reference
    (t(1)), it was not, and a gate's confirmed compile SLOW came out INCONCLUSIVE."""
    first = [math.log(2.0) + e for e in (0.004, -0.006, 0.002)]
    second = [math.log(2.0) + 0.034 + e for e in (0.003, -0.003)]
    alone = stats.random_effects([first], 0.99, 0.02, 0.02)
    both = stats.random_effects([first, second], 0.99, 0.02, 0.02)
    assert alone.p_value < 1e-10
    assert both.p_value < 1e-10 and 1.9 < both.ci_low < both.ci_high < 2.2
