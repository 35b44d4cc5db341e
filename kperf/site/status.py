"""kperf/index.html (what the site holds, what it lacks and why) and kperf/points.json
(per graph point: the clock, power and throttle figures asv's tooltip shows)."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kperf.core.telemetry import or_bits
from kperf.site import data
from kperf.site.pages import render as render_page

POINTS_SCHEMA = "kperf-points-1"
GPU_SUITE = re.compile(r"(Time\.track_time|Energy\.track_energy)$")  # need a GPU


def points_index(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Telemetry rows (one per record) merged per graph point (machine, commit, benchmark,
    params)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        key = data.point_key(str(r["machine"] or ""), str(r["commit"] or ""),
                             str(r["benchmark"]), r["params"])
        groups[key].append(r)
    out = {}
    for key, rs in groups.items():
        def vals(name: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r[name] for r in rs if r.get(name) is not None]
        times = [s["time_s"] for r in rs for s in r["per_sample"] if s.get("time_s") is not None]
        bits = vals("throttle_bits_or")
        names = sorted({n for r in rs for n in r["throttle_names"]})
        energy = vals("energy_per_call_j")
        out[key] = {
            "id": data.point_id(key),
            "n_records": len(rs),
            "envs": sorted({r["env_name"] for r in rs}),
            "n_samples": len(times),
            "time_min_s": min(times) if times else None,
            "time_max_s": max(times) if times else None,
            "sm_clock_median_mhz": statistics.median(vals("sm_clock_median_mhz"))
            if vals("sm_clock_median_mhz") else None,
            "sm_clock_min_mhz": min(vals("sm_clock_min_mhz")) if vals("sm_clock_min_mhz")
            else None,
            "power_mean_w": statistics.fmean(vals("power_mean_w")) if vals("power_mean_w")
            else None,
            "power_limit_w": statistics.median(vals("power_limit_w")) if vals("power_limit_w")
            else None,
            "throttle_bits_or": or_bits(int(b) for b in bits),
            "throttle_names": names,
            "energy_per_call_j": statistics.median(energy) if energy else None,
            "energy_note": next((r["energy_note"] for r in rs if r["energy_note"]), ""),
            "energy_state": "; ".join(r["energy_state"] for r in rs if r.get("energy_state")),
        }
    return out


NO_RESULTS_REASON = ("the GPU suites (*Time, *Energy) run only on a machine with a GPU, and "
                     "a CPU-only history holds only the static figures and compile times")


def missing_benchmarks(benchmarks: dict[str, Any], files: list[data.ResultFile]
                       ) -> list[tuple[str, str]]:
    """(benchmark, why) of every benchmark asv knows that has no value on any machine."""
    have = set()
    for rf in files:
        for bench, row in rf.results.items():
            vals = row.get("result")
            vals = vals if isinstance(vals, list) else [vals]
            if any(v is None or (isinstance(v, int | float) and not math.isnan(v))
                   for v in vals):
                have.add(bench)
    out = []
    for bench in sorted(benchmarks):
        if bench in have or bench == "version":
            continue
        if GPU_SUITE.search(bench):
            why = "a GPU suite: no machine of this history ran it (it needs a GPU)"
        else:
            why = "no run of this history selected it (asv run -b), or every case was skipped"
        out.append((bench, why))
    return out


def write_points(path, rows: list[dict[str, Any]], benchmarks: dict[str, Any],
                 files: list[data.ResultFile]) -> dict[str, Any]:
    missing = missing_benchmarks(benchmarks, files)
    payload = {"schema": POINTS_SCHEMA, "points": points_index(rows),
               "n_benchmarks": len([b for b in benchmarks if b != "version"]),
               "no_results": [b for b, _ in missing],
               "no_results_reason": NO_RESULTS_REASON}
    path.write_text(json.dumps(payload, sort_keys=True))
    return payload


@dataclass
class SiteState:
    """What the status page says of one publish."""
    machines: dict[str, dict[str, Any]]
    files: list[data.ResultFile]
    benchmarks: dict[str, Any]
    n_records: int
    n_rows: int
    n_reports: int
    notes: data.Notes
    problems: list[str]
    offline: bool
    commit_url: str
    commit_how: str
    asv_ok: bool
    asv_error: str = ""


def render(s: SiteState) -> str:
    by_machine: dict[str, list[data.ResultFile]] = defaultdict(list)
    for rf in s.files:
        by_machine[rf.machine].append(rf)
    machines = [{"name": m, "gpu": s.machines.get(m, {}).get("gpu", "?"),
                 "files": len(by_machine[m]), "commits": len({rf.commit for rf in by_machine[m]})}
                for m in sorted(set(s.machines) | set(by_machine))]
    return render_page("status.html", title="Site status", here="status", s=s,
                       machines=machines, missing=missing_benchmarks(s.benchmarks, s.files))
