"""kperf/index.html (what the site holds, what it lacks and why) and kperf/points.json
(per graph point: the clock, power and throttle figures asv's tooltip shows)."""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from typing import Any

from kperf.core.telemetry import or_bits
from kperf.site import data
from kperf.site.pages import esc, notes_box, page

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
    import math

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


def render(*, machines: dict[str, dict[str, Any]], files: list[data.ResultFile],
           benchmarks: dict[str, Any], n_records: int, n_rows: int, n_reports: int,
           notes: data.Notes, problems: list[str], offline: bool,
           commit_url: str, commit_how: str, asv_ok: bool, asv_error: str = "") -> str:
    missing = missing_benchmarks(benchmarks, files)
    parts = ["<h1>Site status</h1>"]
    if not asv_ok:
        parts.append(f'<div class="notes" id="asv-failed"><b>asv publish failed</b>, so this '
                     f"site has only kperf's pages; the error:<pre>{esc(asv_error)}</pre>"
                     "</div>")
    state = ("works offline: every script, style sheet and font is in this folder "
             "(<code>vendor/</code>, with <code>vendor/LICENSES.txt</code>)" if offline else
             "<b>not offline</b>: asv's pages still load scripts from a CDN, because the "
             "pinned copies were not found (run <code>bash kperf/site/install_assets.sh</code>"
             " or set <code>KPERF_SITE_ASSETS</code>; docs/site.md)")
    by_machine: dict[str, list[data.ResultFile]] = defaultdict(list)
    for rf in files:
        by_machine[rf.machine].append(rf)
    mrows = "".join(
        f'<tr><td class="l"><code>{esc(m)}</code></td><td class="l">'
        f'{esc(machines.get(m, {}).get("gpu", "?"))}</td><td>{len(by_machine[m])}</td>'
        f'<td>{len({rf.commit for rf in by_machine[m]})}</td></tr>'
        for m in sorted(set(machines) | set(by_machine)))
    parts.append(
        f"<ul><li>asv's pages: {state}.</li>"
        f"<li>commit links: {esc(commit_url) if commit_url else 'none'} "
        f"<span class=muted>({esc(commit_how)})</span></li>"
        f"<li>records read: {n_records} ({n_rows} timed processes on the "
        f'<a href="telemetry.html">clocks &amp; power</a> page); gate reports kept: '
        f'{n_reports} (<a href="gate/index.html">gate reports</a>)</li></ul>'
        f'<table><tr><th class="l">machine</th><th class="l">GPU</th><th>result files</th>'
        f"<th>commits</th></tr>{mrows}</table>")
    if problems:
        parts.append('<div class="notes" id="problems"><b>Publishing problems</b><ul>'
                     + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul></div>")
    parts.append(notes_box(notes, "files"))
    if missing:
        rows = "".join(f'<tr><td class="l"><code>{esc(b)}</code></td><td class="l">{esc(w)}'
                       "</td></tr>" for b, w in missing)
        parts.append(f'<h2 id="missing">Benchmarks without results ({len(missing)})</h2>'
                     "<p>asv's grid and list show these as blank.</p>"
                     f'<table><tr><th class="l">benchmark</th><th class="l">why</th></tr>'
                     f"{rows}</table>")
    else:
        parts.append('<h2 id="missing">Benchmarks without results</h2><p>None: every '
                     "benchmark has a result on some machine.</p>")
    if offline:
        parts.append('<p class="muted">Third-party licences: <a href="../vendor/LICENSES.txt">'
                     "vendor/LICENSES.txt</a> (pinned npm packages, kperf/site/assets.json)</p>")
    return page("Site status", "\n".join(parts), "status")
