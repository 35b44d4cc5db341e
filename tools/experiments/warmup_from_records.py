"""Could a power-capped case stop its warm-up when the cap rule's wait ends? Read from the
records of a whole-suite run (each keeps its warm-up trace since 2026-12-02):

    python tools/experiments/warmup_from_records.py .asv/records

For every case whose warm-up ended at the cap: the GPU's idle time before it, the warm-up
it took, when the cap rule's wait ended (``harness.timing.Plan``: 1 s from the start once
the power reached 85% of the limit, and 1 s past its first trial at 95%), and how far the
median of the three warm-up trials ending there lies from the median of the timed trials.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from harness.timing import Plan


def wait_end(trace: list[dict], limit_w: float, plan: Plan) -> float | None:
    near = [r["t_s"] for r in trace if r["w"] and r["w"] >= plan.cap_near_fraction * limit_w]
    capped = [r["t_s"] for r in trace if r["w"] and r["w"] >= plan.cap_fraction * limit_w]
    if not near:
        return None
    return max(plan.power_window_s, capped[0] + plan.cap_settle_s if capped else 0.0)


def row(rec: dict, plan: Plan) -> str | None:
    m = rec["measurement"]
    trace, windows = m.get("warmup_trace") or [], m.get("windows") or []
    limit_w = next((w.get("power_limit_w") for w in windows if w.get("power_limit_w")), None)
    if not m.get("at_cap") or not trace or not limit_w:
        return None
    end = wait_end(trace, limit_w, plan)
    upto = [r["s"] for r in trace if end is not None and r["t_s"] <= end + 1e-9][-3:]
    timed = statistics.median(m["samples"])
    off = f"{statistics.median(upto) / timed - 1:+.2%}" if len(upto) == 3 else "n/a"
    idle = rec.get("idle_before_s")
    p = rec["params"]
    return (f"| {p['case']} {p['dtype']} {p['backend']} | "
            f"{'first' if idle is None else f'{idle:.2f}'} | {m['warmup_s']:.2f} | "
            f"{end if end is not None else float('nan'):.2f} | {off} |")


def main(folder: Path) -> None:
    plan = Plan()
    print("| case | idle before s | warm-up s | cap wait ended s | level there vs trials |")
    print("|---|---|---|---|---|")
    for path in sorted(folder.rglob("*.json")):
        line = row(json.loads(path.read_text()), plan)
        if line:
            print(line)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
