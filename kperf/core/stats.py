"""Statistics of the regression gate: paired rounds, intervals, error control over cases
and over repeated looks.

Everything here works on plain sequences of floats and knows nothing about asv, kernels
or GPUs. Ratios are head / base, so a ratio above 1 means the head is slower (asv's
convention: a larger value is worse).

The replicate is a **round**: base and head measured next to each other (one block each,
order alternating from round to round). A round's log ratio ``ln(head / base)`` cancels
what the GPU does slowly (temperature, a neighbour's load, drift); rounds are treated as
independent, samples inside a block are not (docs/gate.md, "How it decides").
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

    n: int  # rounds
    ratio: float  # exp(mean log ratio)
    ci_low: float  # interval of the ratio at the level it was asked for
    ci_high: float
    p_value: float  # two-sided, H0: ratio == 1
    sd: float  # standard deviation of the log ratios (before the floor)


def random_effects(groups: Sequence[Sequence[float]], level: float, sd_floor: float = 0.0,
                   tau_floor: float = 0.0, fitted: int = 0) -> Comparison:
    """Log ratios of rounds measured by several pairs of worker processes (``groups``, one
    per pair): their mean, with the pairs as a level of replication.

    Inside a pair the rounds scatter by ``s`` (pooled, at least ``sd_floor``); each pair
    also carries an offset of its own (where its processes placed their buffers, most
    likely: on an H200 on 2026-12-01 two pairs of the same code sat up to 2.5% apart while
    each pair's rounds agreed to 0.05%, docs/journal/2026-12-01.md). The offsets' spread ``tau`` is
    estimated from the pairs' means (DerSimonian-Laird) and never taken below
    ``tau_floor``, the spread measured on
    the hardware: one pair alone cannot show how far its offset is from the truth. With
    one group and no floor this is the paired t-test.

    ``fitted``: effects already taken out of groups of one round each (the order of the
    sides, ``look.without_order``); each costs the pairs' spread a degree of freedom.
    """
    groups = [np.asarray(g, float) for g in groups if len(g)]
    sizes = np.array([g.size for g in groups])
    n, k = int(sizes.sum()), len(groups)
    if n < 2:
        raise ValueError(f"a comparison needs at least 2 rounds, got {n}")
    means = np.array([g.mean() for g in groups])
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    s2_free = within / (n - k) if n > k else 0.0
    s2 = max(s2_free, sd_floor ** 2)
    var = s2 / sizes
    if fitted and k - 1 - fitted < 1:
        raise ValueError(f"{fitted} fitted effect(s) need at least {fitted + 2} pairs, got {k}")
    tau2_dl = 0.0
    if k >= 2:
        w = 1.0 / var
        fixed = float((w * means).sum() / w.sum())
        q = float((w * (means - fixed) ** 2).sum())
        # DerSimonian-Laird; a fitted effect takes its share of Q's expectation and of c
        # (exact for equal weights, as in meta-regression)
        c = float(w.sum() - (w ** 2).sum() / w.sum()) * (k - 1 - fitted) / (k - 1)
        tau2_dl = max(0.0, (q - (k - 1 - fitted)) / c) if c > 0 else 0.0
    tau2 = max(tau2_dl, tau_floor ** 2)
    w = 1.0 / (var + tau2)
    mean = float((w * means).sum() / w.sum())
    se = math.sqrt(1.0 / float(w.sum()))
    # What sets the variance decides the reference distribution: the pairs' own spread
    # (k - 1 degrees of freedom) once it exceeds the floor; else the floor, a spread
    # measured on the hardware and taken as known (normal), unless there is no floor and
    # the rounds alone speak (the paired t, n - k degrees of freedom). Two pairs' spread
    # (one degree of freedom) widens the variance past the floor but is no reference: t(1)
    # made two pairs 3% apart on a 2x change weaker evidence than one pair alone (p 0.015,
    # x0.69 to x5.99: a compile SLOW re-measured by a fresh pair; tests/test_stats.py).
    if tau2_dl > tau_floor ** 2 and (k - 1 - fitted >= 2 or tau_floor == 0.0):
        df = float(max(k - 1 - fitted, 1))
    elif tau_floor > 0.0:
        df = math.inf
    else:
        df = float(max(n - k, 1))
    sd = math.sqrt(s2_free)
    if se == 0.0:
        return Comparison(n, math.exp(mean), math.exp(mean), math.exp(mean),
                          1.0 if mean == 0.0 else 0.0, sd)
    # the distribution's own methods: a frozen ``sps.t(df)`` (its docstring built on every
    # call) took half of a simulated gate's time; the same figures
    shape = () if math.isinf(df) else (df,)
    dist = sps.norm if math.isinf(df) else sps.t
    p = float(2.0 * dist.sf(abs(mean / se), *shape))
    q = float(dist.ppf(0.5 + level / 2.0, *shape))
    return Comparison(n, math.exp(mean), math.exp(mean - q * se), math.exp(mean + q * se), p, sd)


def spent(total: float, look: int, looks: int, power: float = 1.0) -> float:
    """The error rate look ``look`` (1-based) of at most ``looks`` may spend.

    Alpha spending with the power family (Kim and DeMets): by look ``i`` the looks have
    spent ``total * (i / looks) ** power`` in all; 1 spends evenly, larger values keep
    more for the late looks, where most cases are decided. Whatever the power and however
    many looks a case takes before it stops, the chance of any false claim over all of
    them is at most ``total`` (union bound).
    """
    if not 1 <= look <= looks:
        raise ValueError(f"look {look} outside 1..{looks}")
    if power <= 0:
        raise ValueError(f"spending power {power} must be positive")
    return total * ((look / looks) ** power - ((look - 1) / looks) ** power)


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


def label(change: Comparison, same: Comparison, q_value: float, alpha: float,
          min_ratio: float, same_ratio: float | None = None) -> str:
    """SLOW / FAST / SAME / NOISY for one quantity at one look.

    SLOW needs significance after the suite-wide correction (``q_value < alpha``, the
    look's share) and a ratio of at least ``1 + min_ratio``; FAST is the mirror image
    (thresholds symmetric in log space). SAME needs ``same``'s interval (two one-sided
    tests at the look's share of beta) inside the band of changes too small to matter,
    ``same_ratio`` wide (default ``min_ratio``; wider leaves a zone between the two where
    either verdict may come). Anything else cannot be decided from these rounds yet.
    """
    up, down = 1.0 + min_ratio, 1.0 / (1.0 + min_ratio)
    if q_value < alpha and change.ratio >= up:
        return "SLOW"
    if q_value < alpha and change.ratio <= down:
        return "FAST"
    band = min_ratio if same_ratio is None else same_ratio
    if 1.0 / (1.0 + band) <= same.ci_low and same.ci_high <= 1.0 + band:
        return "SAME"
    return "NOISY"
