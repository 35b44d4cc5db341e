"""Judge the gate offline on trials measured by ``tools.noise collect``.

Gate runs are simulated by resampling the measured trials: each draw takes ``n`` trials
per side (disjoint trials of the base for A/A, base against a variant with a known
slowdown otherwise) and passes them, with their clocks and throttle bits, through the
gate's own decision (``tools.gate.decide``) with the repository's thresholds. The
whole-suite false-alarm rate composes many independent A/A cases in one gate run; the
cases are drawn from the two measured kernels, so it assumes the suite's cases are no
noisier than those two.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools import gate

REPO = Path(__file__).resolve().parent.parent
# Case names that the thresholds' rules put in the class each kernel belongs to.
CASE_NAMES = {
    "gemm": "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'torch')",
    "copy": "bench_swiglu.SwigluTime.track_time('hbm-copy-1GiB', 'fp32', 'torch')",
}


def _round(trials: Sequence[dict[str, Any]]) -> gate.RoundData:
    clocks = [t["sm_clock_mhz"] for t in trials]
    return gate.RoundData(
        status="ok", samples=[t["seconds"] for t in trials],
        clocks=clocks if all(c is not None for c in clocks) else None,
        throttle=[int(t["throttle_bits"] or 0) for t in trials], backend="nvml")


def _case(base: Sequence[dict], head: Sequence[dict]) -> gate.CaseData:
    return gate.CaseData(gate.Side([_round(base)]), gate.Side([_round(head)]), unit="seconds")


def verdicts(pairs: dict[str, tuple[Sequence[dict], Sequence[dict]]],
             th: gate.Thresholds) -> list[str]:
    cases = {gate.CaseId("sim", name): _case(b, h) for name, (b, h) in pairs.items()}
    return [v.verdict for v in gate.decide(cases, th)]


def _pools(data: dict[str, Any]) -> dict[tuple[str, float], list[dict]]:
    pools: dict[tuple[str, float], list[dict]] = {}
    for t in data["trials"]:
        pools.setdefault((t["kernel"], t["slowdown"]), []).append(t)
    return pools


def rates(data: dict[str, Any], th: gate.Thresholds, n: int, draws: int = 400,
          seed: int = 1) -> dict[tuple[str, float], dict[str, float]]:
    """Per kernel and slowdown: the share of simulated gate runs giving each verdict."""
    rng = random.Random(seed)
    pools = _pools(data)
    out = {}
    for (kernel, slowdown), pool in sorted(pools.items()):
        base_pool = pools[(kernel, 0.0)]
        counts: dict[str, int] = {}
        for _ in range(draws):
            if slowdown == 0.0:
                picked = rng.sample(base_pool, 2 * n)
                base, head = picked[:n], picked[n:]
            else:
                base, head = rng.sample(base_pool, n), rng.sample(pool, n)
            verdict = verdicts({CASE_NAMES[kernel]: (base, head)}, th)[0]
            counts[verdict] = counts.get(verdict, 0) + 1
        out[(kernel, slowdown)] = {k: v / draws for k, v in counts.items()}
    return out


def suite_false_alarms(data: dict[str, Any], th: gate.Thresholds, n: int, cases: int = 24,
                       draws: int = 200, seed: int = 2) -> float:
    """Share of simulated A/A gate runs over ``cases`` cases with any SLOW verdict."""
    rng = random.Random(seed)
    pools = _pools(data)
    kernels = sorted({k for k, _ in pools})
    alarms = 0
    for _ in range(draws):
        pairs = {}
        for i in range(cases):
            kernel = kernels[i % len(kernels)]
            picked = rng.sample(pools[(kernel, 0.0)], 2 * n)
            pairs[CASE_NAMES[kernel].replace("'torch'", f"'torch-{i}'")] = (picked[:n],
                                                                           picked[n:])
        alarms += "SLOW" in verdicts(pairs, th)
    return alarms / draws


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


def report(data: dict[str, Any], thresholds: Path | None = None) -> str:
    th = gate.Thresholds.load(thresholds or REPO / "thresholds.json")
    lines = [f"{data['gpu']}, {data['date']}, telemetry {data['telemetry']}, "
             f"{len(data['trials'])} trials in {data['wall_s']:.0f} s", ""]
    if not data["trials"]:  # a sampler-only collection
        return "\n".join(lines + _sampler_lines(data))
    lines += ["| kernel | slowdown | trials a side | SLOW | SAME | FAST | INCONCLUSIVE |",
              "|---|---|---|---|---|---|---|"]
    for n in (5, 10):
        for (kernel, slowdown), share in rates(data, th, n).items():
            cells = " | ".join(f"{share.get(k, 0.0):.1%}"
                               for k in ("SLOW", "SAME", "FAST", "INCONCLUSIVE"))
            lines.append(f"| {kernel} | {slowdown:.0%} | {n} | {cells} |")
    lines += ["", "| trials a side | A/A gate runs (24 cases) with any false SLOW |", "|---|---|"]
    for n in (5, 10):
        lines.append(f"| {n} | {suite_false_alarms(data, th, n):.1%} |")
    lines += ["", "| kernel | r(time, clock) | CoV time | CoV time x clock | clock range MHz |",
              "|---|---|---|---|---|"]
    for kernel in ("gemm", "copy"):
        c = clock_relation(data, kernel)
        lines.append(f"| {kernel} | {c['r']:.2f} | {c['cov_time']:.2%} | {c['cov_cycles']:.2%} "
                     f"| {c['clock_min']:.0f}-{c['clock_max']:.0f} |")
    return "\n".join(lines + _sampler_lines(data))


def _sampler_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    lines += ["", "| kernel | sampler period | pairs | with sampler / without - 1 (median "
              "of pairs) | 95% interval |", "|---|---|---|---|---|"]
    for kernel, c in sampler_cost(data).items():
        lines.append(f"| {kernel} | {c['period_s'] * 1e3:.0f} ms | {c['pairs']} | "
                     f"{c['delta']:+.3%} | [{c['lo']:+.3%}, {c['hi']:+.3%}] |")
    return lines
