"""How long must a power-capped case warm up? Read from the records of a run (each keeps
its warm-up trace since 2026-12-02):

    python -m tools.lab.experiments.warmup_from_records .asv/records [cap_settle_s ...]

A warm-up trace and the timed trials that follow it are one run of equal trials, so the
trace answers what an earlier stop would have measured: for each ``cap_settle_s`` given
(``kperf.core.timing.Plan``'s rule, replayed on the trace by the harness's own functions),
where the warm-up would have ended, and the median of the ten trials from there against
the median the run kept. Printed per rule: warm-up saved, |shift| of the median (median,
90th percentile, largest) and its signed mean (a bias would show there); and, for scale,
how far apart two runs of the same case lie when the folder holds two.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from kperf.core.timing import Plan
from kperf.core.warmup import _at_cap, _cap_wait_s, _settled


def stop_index(trace: Sequence[dict], limit_w: float, plan: Plan) -> int | None:
    """How many warm-up trials ``plan`` would have run on this trace (None: more)."""
    values: list[float] = []
    clocks: list[float | None] = []
    powers: list[float | None] = []
    ends: list[float] = []
    for n, trial in enumerate(trace, 1):
        values.append(trial["s"])
        clocks.append(trial["mhz"])
        powers.append(trial["w"])
        ends.append(trial["t_s"])
        limits = [limit_w] * n
        if (trial["t_s"] >= plan.warmup_min_s
                and _cap_wait_s(ends, powers, limits, 0.0, plan) == 0
                and _settled(values, clocks, plan, powers, _at_cap(powers[-1], limit_w, plan))):
            return n
    return None


def capped(records: list[dict]) -> list[dict]:
    out = []
    for rec in records:
        m = rec.get("measurement") or {}
        limit_w = next((w.get("power_limit_w") for w in m.get("windows") or []
                        if w.get("power_limit_w")), None)
        if m.get("at_cap") and m.get("warmup_trace") and limit_w:
            out.append({**rec, "_limit_w": limit_w})
    return out


def replay(records: list[dict], plan: Plan) -> tuple[list[float], list[float]]:
    """(seconds saved, relative shift of the median) per record."""
    saved, shift = [], []
    for rec in records:
        m = rec["measurement"]
        trace = m["warmup_trace"]
        n = stop_index(trace, rec["_limit_w"], plan)
        if n is None:
            continue
        trials = ([t["s"] for t in trace[n:]] + m["samples"])[:len(m["samples"])]
        saved.append(m["warmup_s"] - trace[n - 1]["t_s"])
        shift.append(statistics.median(trials) / statistics.median(m["samples"]) - 1.0)
    return saved, shift


def between_runs(records: list[dict]) -> list[float]:
    """|ratio - 1| of the medians of a case's first two records."""
    by_case: dict[str, list[dict]] = {}
    for rec in sorted(records, key=lambda r: r.get("recorded_at") or 0):
        by_case.setdefault(json.dumps(rec["params"], sort_keys=True), []).append(rec)
    return [abs(statistics.median(b["measurement"]["samples"])
                / statistics.median(a["measurement"]["samples"]) - 1.0)
            for a, b, *_ in (recs for recs in by_case.values() if len(recs) >= 2)]


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(folder: Path, settle_values: Sequence[float]) -> None:
    records = capped([json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))])
    print(f"{len(records)} capped warm-ups under {folder}")
    print("| cap_settle_s | cases | saved s (median, sum) | |shift| median / p90 / max "
          "| signed mean |")
    print("|---|---|---|---|---|")
    for settle in settle_values:
        saved, shift = replay(records, Plan(cap_settle_s=settle))
        if not shift:
            continue
        size = [abs(s) for s in shift]
        print(f"| {settle} | {len(shift)} | {statistics.median(saved):.2f}, {sum(saved):.0f} "
              f"| {statistics.median(size):.2%} / {pct(size, 0.9):.2%} / {max(size):.2%} "
              f"| {statistics.mean(shift):+.2%} |")
    runs = between_runs(records)
    if runs:
        print(f"two runs of the same case ({len(runs)} cases): |ratio - 1| median "
              f"{statistics.median(runs):.2%}, p90 {pct(runs, 0.9):.2%}, largest {max(runs):.2%}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [float(v) for v in sys.argv[2:]] or [1.0, 0.5, 0.3, 0.0])
