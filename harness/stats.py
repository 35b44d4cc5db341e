"""Statistics of the regression gate: two-sample tests, intervals, suite-wide error control.

Everything here works on plain sequences of floats (seconds, or cycles = seconds x MHz)
and knows nothing about asv, kernels or GPUs. Ratios are head / base, so a ratio above 1
means the head is slower (asv's convention: a larger value is worse).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class Comparison:
    """Head against base for one case and one quantity (time or cycles)."""

    n_base: int
    n_head: int
    median_base: float
    median_head: float
    ratio: float  # median_head / median_base
    ci_low: float  # bootstrap interval of the ratio of medians
    ci_high: float
    p_value: float  # two-sided Mann-Whitney U


def mann_whitney_p(base: Sequence[float], head: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when every sample is identical."""
    a, b = np.asarray(base, float), np.asarray(head, float)
    if np.all(a == a[0]) and np.all(b == a[0]):
        return 1.0  # scipy warns and returns nan when there is no variation at all
    return float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def bootstrap_ratio_ci(base: Sequence[float], head: Sequence[float], level: float = 0.99,
                       n_boot: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of median(head) / median(base).

    The two sides are resampled independently. A fixed seed keeps a report reproducible
    from the same samples.
    """
    a, b = np.asarray(base, float), np.asarray(head, float)
    rng = np.random.default_rng(seed)
    med_a = np.median(rng.choice(a, size=(n_boot, a.size), replace=True), axis=1)
    med_b = np.median(rng.choice(b, size=(n_boot, b.size), replace=True), axis=1)
    ratios = med_b / med_a
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def _split(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    if sum(sizes) != values.size:
        raise ValueError(f"group sizes {list(sizes)} do not add up to {values.size} samples")
    return np.split(values, np.cumsum(sizes)[:-1])


def _two_level_medians(groups: list[np.ndarray], n_boot: int,
                       rng: np.random.Generator) -> np.ndarray:
    """Bootstrap medians resampling whole groups first, then samples inside each group."""
    picks = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    sizes = {g.size for g in groups}
    if len(sizes) == 1:  # equal rounds (the usual case): one vectorised draw
        n = sizes.pop()
        table = np.stack(groups)
        inner = rng.integers(0, n, size=(n_boot, len(groups), n))
        drawn = table[picks[:, :, None], inner]
        return np.median(drawn.reshape(n_boot, -1), axis=1)
    out = np.empty(n_boot)
    for i, pick in enumerate(picks):
        drawn = [rng.choice(groups[g], size=groups[g].size, replace=True) for g in pick]
        out[i] = np.median(np.concatenate(drawn))
    return out


def grouped_ratio_ci(base: Sequence[float], head: Sequence[float],
                     base_groups: Sequence[int], head_groups: Sequence[int],
                     level: float = 0.99, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Interval of median(head) / median(base) when samples come in groups (asv rounds).

    Each round is a separate process whose level can shift as a whole (a power-capped GEMM
    settled 1.7-2.4% apart in six processes on an H200 on 2026-12-01, while its samples
    inside one process varied 0.06%), so the samples of a round are not independent. Resampling
    rounds, then samples within them, carries that shift into the interval; with one
    round per side it is the ordinary bootstrap.
    """
    a, b = np.asarray(base, float), np.asarray(head, float)
    rng = np.random.default_rng(seed)
    med_a = _two_level_medians(_split(a, base_groups), n_boot, rng)
    med_b = _two_level_medians(_split(b, head_groups), n_boot, rng)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(med_b / med_a, [tail, 1.0 - tail])
    return float(low), float(high)


def compare(base: Sequence[float], head: Sequence[float], level: float = 0.99,
            seed: int = 0, base_groups: Sequence[int] | None = None,
            head_groups: Sequence[int] | None = None) -> Comparison:
    """Head against base. With ``*_groups`` (samples per round, in order) the interval
    accounts for shifts between rounds (``grouped_ratio_ci``)."""
    if len(base) == 0 or len(head) == 0:
        raise ValueError(f"compare needs samples on both sides (base {len(base)}, "
                         f"head {len(head)})")
    median_base, median_head = float(np.median(base)), float(np.median(head))
    if median_base <= 0:
        raise ValueError(f"base median {median_base} is not positive: no ratio")
    grouped = base_groups is not None and head_groups is not None and (
        len(base_groups) > 1 or len(head_groups) > 1)
    if grouped:
        low, high = grouped_ratio_ci(base, head, base_groups, head_groups, level, seed=seed)
    else:
        low, high = bootstrap_ratio_ci(base, head, level, seed=seed)
    return Comparison(len(base), len(head), median_base, median_head, median_head / median_base,
                      low, high, mann_whitney_p(base, head))


def to_cycles(seconds: Sequence[float], clocks_mhz: Sequence[float]) -> list[float]:
    """Per-sample cycle counts (in millions): time x the clock its window ran at."""
    if len(seconds) != len(clocks_mhz):
        raise ValueError(f"{len(seconds)} samples but {len(clocks_mhz)} clock readings")
    return [s * c for s, c in zip(seconds, clocks_mhz, strict=True)]


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted q-values in the input order (step-up; monotone; capped at 1).

    Under the complete null (a PR that changes nothing) the chance of any false alarm
    in the whole suite is at most q, because the FDR then equals the family-wise rate.
    """
    p = np.asarray(p_values, float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (family-wise error control) in the input order."""
    p = np.asarray(p_values, float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p)
    scaled = p[order] * (m - np.arange(m))
    adjusted = np.maximum.accumulate(scaled)
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]


ADJUSTERS = {"bh": benjamini_hochberg, "holm": holm}


def adjust(p_values: Sequence[float], method: str) -> list[float]:
    if method not in ADJUSTERS:
        raise ValueError(f"unknown correction {method!r}; choose one of {sorted(ADJUSTERS)}")
    return ADJUSTERS[method](p_values)


def label(comparison: Comparison, q_value: float, min_ratio: float, alpha: float) -> str:
    """SLOW / FAST / SAME / NOISY for one quantity.

    SLOW needs significance after the suite-wide correction, a point ratio of at least
    ``1 + min_ratio`` and an interval that excludes 1; FAST is the mirror image
    (thresholds symmetric in log space). SAME needs the whole interval inside the band
    of changes too small to matter. Anything else cannot be decided from these samples.
    """
    up, down = 1.0 + min_ratio, 1.0 / (1.0 + min_ratio)
    c = comparison
    if q_value < alpha and c.ratio >= up and c.ci_low > 1.0:
        return "SLOW"
    if q_value < alpha and c.ratio <= down and c.ci_high < 1.0:
        return "FAST"
    if down <= c.ci_low and c.ci_high <= up:
        return "SAME"
    return "NOISY"


def smallest_possible_p(n_base: int, n_head: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value these sample counts allow."""
    return 2.0 / math.comb(n_base + n_head, min(n_base, n_head))
