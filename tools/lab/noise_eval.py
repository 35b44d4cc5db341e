"""Evaluate a ``tools.lab.noise collect`` file: the trials' noise, the clock's relation to
time, and the telemetry sampler's cost (paired A/B). The gate's own error rates under
its sequential design are simulated in tools/lab/simulate.py.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def _cov(values: Sequence[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def clock_relation(data: dict[str, Any], kernel: str) -> dict[str, float]:
    base = [t for t in data["trials"] if t["kernel"] == kernel and t["slowdown"] == 0.0
            and t["sm_clock_mhz"]]
    secs = [t["seconds"] for t in base]
    clocks = [t["sm_clock_mhz"] for t in base]
    cycles = [s * c for s, c in zip(secs, clocks, strict=True)]
    constant = len(set(clocks)) == 1 or len(set(secs)) == 1
    r = float("nan") if constant else statistics.correlation(secs, clocks)
    return {"r": r, "cov_time": _cov(secs),
            "cov_cycles": _cov(cycles), "clock_min": min(clocks), "clock_max": max(clocks),
            "n": len(base)}


def sampler_cost(data: dict[str, Any], level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, float]]:
    """kernel -> the median over pairs of (with sampler / without) - 1, with a bootstrap
    interval of that median; each pair is two adjacent, otherwise identical measurements."""
    import numpy as np

    out = {}
    rows = data["sampler_ab"]
    for kernel in sorted({r["kernel"] for r in rows}):
        pairs: dict[int, dict[bool, float]] = {}
        for r in rows:
            if r["kernel"] == kernel and "pair" in r:
                pairs.setdefault(r["pair"], {})[r["sampler"]] = r["seconds"]
        ratios = np.array([p[True] / p[False] for p in pairs.values() if len(p) == 2])
        if len(ratios) < 2:
            continue
        rng = np.random.default_rng(seed)
        boot = np.median(rng.choice(ratios, (4000, len(ratios))), axis=1)
        lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
        out[kernel] = {"delta": float(np.median(ratios)) - 1.0, "lo": float(lo) - 1.0,
                       "hi": float(hi) - 1.0, "pairs": len(ratios),
                       "period_s": max(r["period_s"] for r in rows if r["kernel"] == kernel)}
    return out


def report(data: dict[str, Any]) -> str:
    lines = [f"{data['gpu']}, {data['date']}, telemetry {data['telemetry']}, "
             f"{len(data['trials'])} trials in {data['wall_s']:.0f} s", ""]
    if data["trials"]:
        lines += ["| kernel | r(time, clock) | CoV time | CoV time x clock | clock range MHz |",
                  "|---|---|---|---|---|"]
        for kernel in sorted({t["kernel"] for t in data["trials"]}):
            c = clock_relation(data, kernel)
            lines.append(f"| {kernel} | {c['r']:.2f} | {c['cov_time']:.2%} | "
                         f"{c['cov_cycles']:.2%} | {c['clock_min']:.0f}-{c['clock_max']:.0f} |")
    return "\n".join(lines + _sampler_lines(data))


def _sampler_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    lines += ["", "| kernel | sampler period | pairs | with sampler / without - 1 (median "
              "of pairs) | 95% interval |", "|---|---|---|---|---|"]
    for kernel, c in sampler_cost(data).items():
        lines.append(f"| {kernel} | {c['period_s'] * 1e3:.0f} ms | {c['pairs']} | "
                     f"{c['delta']:+.3%} | [{c['lo']:+.3%}, {c['hi']:+.3%}] |")
    return lines
