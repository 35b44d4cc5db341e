"""Adaptive trials' stopping rule (``Plan.stop_rel_ci``): sampling stops once the 95%
interval of the trials' median is narrow enough."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kperf.core.plan import Plan

# Student's t at 97.5% by degrees of freedom (1-30); beyond, the normal's 1.96 within 4%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def median_rel_half_width(samples: Sequence[float]) -> float | None:
    """The half-width of a 95% interval of the samples' median, over the median: Student's
    t times the median's standard error for near-normal samples, sqrt(pi / 2) s / sqrt(n).
    A trial is the median of hundreds of reps, so trials scatter near-normally; one that
    caught a hiccup widens the interval, and sampling goes on."""
    n = len(samples)
    median = statistics.median(samples) if samples else 0.0
    if n < 2 or median <= 0:
        return None
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return t * math.sqrt(math.pi / 2) * statistics.stdev(samples) / math.sqrt(n) / median


def trials_stop(plan: Plan, at_cap: bool, samples: Sequence[float]) -> str:
    """Why the trials would end after ``samples`` (``Measurement.trials_stop``)."""
    if plan.stop_rel_ci <= 0:
        return "fixed"
    if at_cap:
        return "at_cap"
    if len(samples) >= plan.min_trials:
        width = median_rel_half_width(samples)
        if width is not None and width <= plan.stop_rel_ci:
            return "precise"
    return "max_trials"

