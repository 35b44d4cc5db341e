"""harness.stats on sample sets whose truth is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from harness import stats


def _noisy(level: float, cov: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(level * (1 + cov * rng.standard_normal(n)))


def test_shift_is_significant_and_the_interval_holds_the_true_ratio() -> None:
    base, head = _noisy(1.0, 0.01, 30, 1), _noisy(1.05, 0.01, 30, 2)
    c = stats.compare(base, head)
    assert c.p_value < 1e-6
    assert c.ci_low < 1.05 < c.ci_high
    assert c.ci_low > 1.0


def test_no_shift_keeps_the_interval_around_one() -> None:
    c = stats.compare(_noisy(1.0, 0.01, 30, 3), _noisy(1.0, 0.01, 30, 4))
    assert c.ci_low < 1.0 < c.ci_high
    assert c.ci_high - c.ci_low < 0.02


def test_mann_whitney_matches_scipy_and_handles_constant_samples() -> None:
    a, b = _noisy(1.0, 0.02, 12, 5), _noisy(1.02, 0.02, 12, 6)
    assert stats.mann_whitney_p(a, b) == pytest.approx(
        sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert stats.mann_whitney_p([2.0] * 8, [2.0] * 8) == 1.0


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    a, b = _noisy(1.0, 0.05, 10, 7), _noisy(1.1, 0.05, 10, 8)
    assert stats.bootstrap_ratio_ci(a, b, seed=3) == stats.bootstrap_ratio_ci(a, b, seed=3)


def test_benjamini_hochberg_against_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005 0.01 0.03 0.04 -> x4/1, x4/2, x4/3, x4/4 = .02 .02 .04 .04
    assert stats.benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert stats.benjamini_hochberg([]) == []


def test_holm_against_hand_computed_values() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted .005 .01 .03 .04 -> x4 x3 x2 x1 = .02 .03 .06 .04 -> running max .02 .03 .06 .06
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_bh_keeps_suite_wide_false_alarms_rare_under_the_complete_null() -> None:
    rng = np.random.default_rng(11)
    suites_with_alarm = 0
    for _ in range(200):
        p = rng.uniform(size=100)  # 100 unchanged cases
        suites_with_alarm += min(stats.benjamini_hochberg(p)) < 0.05
    per_case = sum(min(rng.uniform(size=100)) < 0.05 for _ in range(200))
    assert suites_with_alarm / 200 <= 0.10  # ~0.05 expected
    assert per_case / 200 > 0.9  # uncorrected, almost every suite would raise one


def test_label_needs_significance_magnitude_and_interval() -> None:
    def cmp(ratio: float, lo: float, hi: float) -> stats.Comparison:
        return stats.Comparison(30, 30, 1.0, ratio, ratio, lo, hi, 1e-9)

    assert stats.label(cmp(1.10, 1.07, 1.13), 1e-6, 0.05, 0.01) == "SLOW"
    assert stats.label(cmp(1.10, 1.07, 1.13), 0.2, 0.05, 0.01) == "NOISY"  # not significant
    assert stats.label(cmp(1.03, 1.02, 1.04), 1e-6, 0.05, 0.01) == "SAME"  # below the floor
    assert stats.label(cmp(0.90, 0.88, 0.93), 1e-6, 0.05, 0.01) == "FAST"
    assert stats.label(cmp(1.00, 0.90, 1.12), 0.5, 0.05, 0.01) == "NOISY"  # too wide for SAME


def test_cycles_and_input_errors() -> None:
    assert stats.to_cycles([1e-3, 2e-3], [1500.0, 1000.0]) == pytest.approx([1.5, 2.0])
    with pytest.raises(ValueError, match="2 samples but 1 clock"):
        stats.to_cycles([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="both sides"):
        stats.compare([], [1.0])
    with pytest.raises(ValueError, match="unknown correction 'bonf'"):
        stats.adjust([0.1], "bonf")


def test_smallest_possible_p() -> None:
    assert stats.smallest_possible_p(5, 5) == pytest.approx(2 / 252)
    assert stats.smallest_possible_p(7, 7) < 0.002 < stats.smallest_possible_p(6, 6)


def _rounds(levels, n=10, noise=0.0005, seed=0):
    rng = np.random.default_rng(seed)
    return [float(x) for level in levels for x in level * (1 + noise * rng.standard_normal(n))]


def test_grouped_interval_carries_shifts_between_rounds():
    # A/A: every round settles at its own level (as power-capped GEMM processes do)
    # (both sides' rounds come from one distribution of levels: two of base's settle low,
    # two of head's high)
    base = _rounds([1.000, 1.001, 1.020], seed=1)
    head = _rounds([1.019, 1.020, 1.001], seed=2)
    pooled = stats.compare(base, head, level=0.95)
    grouped = stats.compare(base, head, level=0.95, base_groups=[10, 10, 10],
                            head_groups=[10, 10, 10])
    assert pooled.ci_low > 1.0  # samples taken as independent: a "significant" change
    assert grouped.ci_low < 1.0 < grouped.ci_high  # rounds as replicates: no evidence
    assert grouped.ci_low < pooled.ci_low - 0.01
    assert grouped.ratio == pooled.ratio and grouped.p_value == pooled.p_value


def test_grouped_interval_still_sees_a_real_shift():
    base = _rounds([1.000, 1.004, 0.997], seed=3)
    head = _rounds([1.050, 1.054, 1.047], seed=4)
    grouped = stats.compare(base, head, base_groups=[10] * 3, head_groups=[10] * 3)
    assert grouped.ci_low > 1.03


def test_group_sizes_must_cover_the_samples():
    with pytest.raises(ValueError, match="do not add up"):
        stats.compare([1.0] * 6, [1.0] * 6, base_groups=[3, 2], head_groups=[3, 3])
