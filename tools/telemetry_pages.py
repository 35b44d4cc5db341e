"""GPU telemetry pages for the published site: what the GPU did while each point was timed.

    python -m tools.telemetry_pages [--html html] [--records .asv/records]

``asv publish`` deletes and rewrites ``html/``, so this runs after it (tools/bench.py calls
``write_telemetry_pages``). It reads the per-sample records harness/record.py writes and
writes ``html/kperf/telemetry.json`` and a static ``html/kperf/telemetry.html`` (data
inline, so it also opens from disk): for each benchmark and point (commit, parameters,
machine) the SM clock median and minimum, memory clock, hottest temperature, mean power
and the OR of throttle bits, overall and per sample.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from harness import record

PAGE_DIR = "kperf"
SCHEMA = "kperf-telemetry-page-1"

NVML_REASONS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap",
                0x8: "HwSlowdown", 0x10: "SyncBoost", 0x20: "SwThermalSlowdown",
                0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown",
                0x100: "DisplayClockSetting"}
# amdgpu SMU_THROTTLER_* bit numbers of indep_throttle_status (kernel amdgpu_smu.h)
AMD_INDEP_BITS = {0: "PPT0", 1: "PPT1", 2: "PPT2", 3: "PPT3", 4: "SPL", 5: "FPPT", 6: "SPPT",
                  7: "SPPT_APU", 16: "TDC_GFX", 17: "TDC_SOC", 18: "TDC_MEM", 19: "TDC_VDD",
                  20: "TDC_CVIP", 21: "EDC_CPU", 22: "EDC_GFX", 23: "APCC", 32: "TEMP_GPU",
                  33: "TEMP_CORE", 34: "TEMP_MEM", 35: "TEMP_EDGE", 36: "TEMP_HOTSPOT",
                  37: "TEMP_SOC", 38: "TEMP_VR_GFX", 39: "TEMP_VR_SOC", 40: "TEMP_VR_MEM0",
                  41: "TEMP_VR_MEM1", 42: "TEMP_LIQUID0", 43: "TEMP_LIQUID1", 44: "VRHOT0",
                  45: "VRHOT1", 46: "PROCHOT_CPU", 47: "PROCHOT_GFX", 56: "PPM", 57: "FIT"}


def throttle_names(backend: str, reason: str, bits: int | None) -> list[str]:
    """Names of the set bits, where the meaning of the bits is known; else hex digits."""
    if not bits:
        return []
    if backend == "nvml":
        table = NVML_REASONS
    elif "indep_throttle_status" in reason:
        table = {1 << bit: name for bit, name in AMD_INDEP_BITS.items()}
    else:  # ASIC-specific throttle_status: no portable meaning
        return [f"0x{bits:x}"]
    names = [name for mask, name in sorted(table.items()) if bits & mask]
    unknown = bits & ~sum(table)
    return names + ([f"0x{unknown:x}"] if unknown else [])


def _known(windows: list[dict[str, Any]], key: str) -> list[float]:
    return [w[key] for w in windows if w.get(key) is not None]


def _or_bits(values: list[int]) -> int | None:
    if not values:
        return None
    out = 0
    for value in values:
        out |= int(value)
    return out


def benign_bits(thresholds: Path | None = None) -> dict[str, int]:
    """Throttle bits that are the normal state under load, per backend (thresholds.json):
    a power-capped GEMM always carries NVML's SwPowerCap, and that is not news."""
    path = thresholds or Path(__file__).resolve().parent.parent / "thresholds.json"
    if not path.exists():
        return {}
    raw = json.loads(path.read_text()).get("benign_throttle_bits", {})
    return {k: int(v, 16) for k, v in raw.items() if k != "doc" and isinstance(v, str)}


def summarize_record(rec: dict[str, Any], benign: dict[str, int] | None = None
                     ) -> dict[str, Any] | None:
    """One page row from one record; None for records without a timed measurement."""
    m = rec.get("measurement")
    if not isinstance(m, dict) or not isinstance(m.get("windows"), list):
        return None
    windows = m["windows"]
    samples = m.get("samples") or []
    sm_median = _known(windows, "sm_clock_mhz_median")
    sm_min = _known(windows, "sm_clock_mhz_min")
    mem = _known(windows, "mem_clock_mhz_median")
    temp = _known(windows, "temperature_c_max")
    power = _known(windows, "power_w_mean")
    bits = _or_bits(_known(windows, "throttle_bits_or"))
    backend, reason = m.get("telemetry_backend", ""), m.get("telemetry_reason", "")
    return {
        "benchmark": rec.get("benchmark"),
        "params": rec.get("params", {}),
        "machine": rec.get("machine"),
        "commit": rec.get("commit") or "",
        "env_name": rec.get("env_name") or "",
        "gpu": rec.get("gpu"),
        "recorded_at": rec.get("recorded_at"),
        "telemetry_backend": backend,
        "telemetry_reason": reason,
        "mode": m.get("mode"),
        "settled": m.get("settled"),
        "n_samples": len(samples),
        "time_median_s": statistics.median(samples) if samples else None,
        "n_readings": sum(int(w.get("n_readings") or 0) for w in windows),
        "sm_clock_median_mhz": statistics.median(sm_median) if sm_median else None,
        "sm_clock_min_mhz": min(sm_min) if sm_min else None,
        "mem_clock_median_mhz": statistics.median(mem) if mem else None,
        "temperature_max_c": max(temp) if temp else None,
        "power_mean_w": statistics.fmean(power) if power else None,
        "throttle_bits_or": bits,
        "throttle_names": throttle_names(backend, reason, bits),
        "throttle_unusual": (bits & ~(benign or {}).get(backend, 0)) if bits else 0,
        "per_sample": [
            {"time_s": samples[i] if i < len(samples) else None,
             "sm_clock_median_mhz": w.get("sm_clock_mhz_median"),
             "sm_clock_min_mhz": w.get("sm_clock_mhz_min"),
             "temperature_max_c": w.get("temperature_c_max"),
             "power_mean_w": w.get("power_w_mean"),
             "throttle_bits_or": w.get("throttle_bits_or"),
             "n_readings": w.get("n_readings")}
            for i, w in enumerate(windows)
        ],
    }


def collect(records_root: Path) -> list[dict[str, Any]]:
    benign = benign_bits()
    rows = [row for rec in record.read_records(records_root)
            if (row := summarize_record(rec, benign))]
    rows.sort(key=lambda r: (str(r["benchmark"]), json.dumps(r["params"], sort_keys=True),
                             str(r["machine"]), r["recorded_at"] or 0.0))
    return rows


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>GPU telemetry per point</title>
<style>
body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}
td.l{text-align:left}tr.point{cursor:pointer}tr.detail td{background:#fafafa}
.warn{background:#ffe0b3}.bad{background:#ffb3b3}#filters *{margin-right:1em}
</style></head><body>
<p><a href="../index.html">&larr; benchmarks</a></p>
<h1>GPU telemetry per point</h1>
<p>Per benchmark and point (commit, parameters, machine): the SM/GFX clock (median over the
samples' window medians, and the lowest reading), memory clock, hottest temperature, mean
power and the OR of throttle bits over all samples. Click a row for its samples. Orange:
the clock fell below 90% of its median during the run, or a throttle bit beyond the
normal state under load was set (benign bits, such as the power cap a big GEMM lives at,
are listed in thresholds.json); red: a thermal or hardware slowdown bit. Compare clocks
with the baseline's, not with the maximum.</p>
<div id="filters"><label>benchmark <select id="bench"></select></label>
<label>machine <select id="machine"></select></label><span id="count"></span></div>
<table><thead><tr><th>benchmark</th><th>params</th><th>machine</th><th>commit</th>
<th>time median (s)</th><th>SM MHz median</th><th>SM MHz min</th><th>mem MHz</th>
<th>max &deg;C</th><th>mean W</th><th>throttle OR</th><th>telemetry</th></tr></thead>
<tbody id="rows"></tbody></table>
<script type="application/json" id="kperf-data">__DATA__</script>
<script>
const data = JSON.parse(document.getElementById("kperf-data").textContent);
const HARD = ["HwSlowdown","SwThermalSlowdown","HwThermalSlowdown","HwPowerBrakeSlowdown",
  "TEMP_", "PROCHOT", "VRHOT"];
function fmt(v, d) { return v === null || v === undefined ? "-" : (typeof v === "number" ?
  v.toFixed(d) : String(v)); }
function cell(tr, text, cls) { const td = tr.insertCell(); td.textContent = text;
  if (cls) td.className = cls; return td; }
function fill(sel, values) { for (const v of ["(all)", ...values]) {
  const o = document.createElement("option"); o.textContent = v; sel.appendChild(o); } }
const bench = document.getElementById("bench"), machine = document.getElementById("machine");
fill(bench, [...new Set(data.points.map(p => p.benchmark))].sort());
fill(machine, [...new Set(data.points.map(p => p.machine))].sort());
function render() {
  const body = document.getElementById("rows"); body.textContent = "";
  const shown = data.points.filter(p => (bench.value === "(all)" || p.benchmark === bench.value)
    && (machine.value === "(all)" || p.machine === machine.value));
  document.getElementById("count").textContent = shown.length + " points";
  for (const p of shown) {
    const tr = body.insertRow(); tr.className = "point";
    cell(tr, p.benchmark, "l"); cell(tr, JSON.stringify(p.params), "l");
    cell(tr, p.machine, "l"); cell(tr, p.commit.slice(0, 8), "l");
    cell(tr, fmt(p.time_median_s, 9)); cell(tr, fmt(p.sm_clock_median_mhz, 0));
    const dipped = p.sm_clock_min_mhz !== null && p.sm_clock_median_mhz !== null &&
      p.sm_clock_min_mhz < 0.9 * p.sm_clock_median_mhz;
    cell(tr, fmt(p.sm_clock_min_mhz, 0), dipped ? "warn" : "");
    cell(tr, fmt(p.mem_clock_median_mhz, 0)); cell(tr, fmt(p.temperature_max_c, 0));
    cell(tr, fmt(p.power_mean_w, 1));
    const names = p.throttle_names.join(" ");
    const hard = HARD.some(h => names.includes(h));
    cell(tr, p.throttle_bits_or === null ? "-" : "0x" + p.throttle_bits_or.toString(16) +
      (names ? " " + names : ""), hard ? "bad" : (p.throttle_unusual ? "warn" : ""));
    cell(tr, p.telemetry_backend + " (" + p.n_readings + " readings)", "l")
      .title = p.telemetry_reason;
    tr.onclick = () => toggle(tr, p);
  }
}
function toggle(tr, p) {
  const next = tr.nextSibling;
  if (next && next.className === "detail") { next.remove(); return; }
  const d = tr.parentNode.insertRow(tr.sectionRowIndex + 1); d.className = "detail";
  const td = d.insertCell(); td.colSpan = 12; td.className = "l";
  td.textContent = p.per_sample.map((s, i) => "#" + i + ": " + fmt(s.time_s, 9) + " s, SM " +
    fmt(s.sm_clock_median_mhz, 0) + " (min " + fmt(s.sm_clock_min_mhz, 0) + ") MHz, " +
    fmt(s.temperature_max_c, 0) + " C, " + fmt(s.power_mean_w, 1) + " W, throttle " +
    (s.throttle_bits_or === null ? "-" : "0x" + s.throttle_bits_or.toString(16)) + ", " +
    s.n_readings + " readings").join("  |  ");
}
bench.onchange = render; machine.onchange = render; render();
</script></body></html>
"""


def write_telemetry_pages(html_dir: str | Path, records_root: str | Path | None = None) -> Path:
    """Write ``<html_dir>/kperf/telemetry.{html,json}``; returns the HTML path."""
    root = Path(records_root) if records_root is not None else record.record_root()
    rows = collect(root) if root.exists() else []
    payload = {"schema": SCHEMA, "records_root": str(root), "points": rows}
    out = Path(html_dir) / PAGE_DIR
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=True)
    (out / "telemetry.json").write_text(text)
    inline = json.dumps(payload, sort_keys=True).replace("<", "\\u003c")  # no "</script>" inside
    page = out / "telemetry.html"
    page.write_text(PAGE.replace("__DATA__", inline))
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", default="html", help="asv's html_dir")
    parser.add_argument("--records", default=None, help="records root (default: .asv/records)")
    args = parser.parse_args(argv)
    print(write_telemetry_pages(args.html, args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
