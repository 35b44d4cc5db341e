"""GPU telemetry page of the published site: what the GPU did while each point was timed.

    python -m kperf.site.telemetry_pages [--html html] [--records .asv/records]

kperf/site/publish.py writes it into the new site before swapping it in. It reads the
per-sample records kperf/core/record.py writes (schema kperf-record-1 and -2; loose files or
record archives) and writes ``html/kperf/telemetry.json`` and a static
``html/kperf/telemetry.html`` (data inline, so it also opens from disk): for each
benchmark and point (commit, parameters, machine) the time, SM clock median and minimum,
memory clock, hottest temperature, mean power, power limit, energy per call and the OR of
throttle bits, overall and per sample. A record that cannot be read is skipped and listed
on the page. ``#point=ID`` (the id kperf/site gives a graph point) shows that point's
rows; asv's graph links there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kperf.core import record
from kperf.core.telemetry import or_bits
from kperf.core.telemetry.processes import record_note, record_others
from kperf.site import data
from kperf.site.pages import render

PAGE_DIR = "kperf"
SCHEMA = "kperf-telemetry-page-2"

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


def environment_bits(thresholds: Path | None = None) -> dict[str, int]:
    """Throttle bits that mean heat, a hardware slowdown or an outside clock setting, per
    backend: thresholds.json's ``throttle_bits.environment``, parsed as the gate parses it
    (kperf/gate/config.py). The power cap a big GEMM lives at is not among them."""
    from kperf import project
    from kperf.gate.config import Thresholds

    try:
        path = thresholds or project.find().thresholds
        return dict(Thresholds.load(path).environment_bits)
    except (ValueError, project.ProjectError):
        return {}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def summarize_record(rec: dict[str, Any], environment: dict[str, int] | None = None
                     ) -> dict[str, Any] | None:
    """One page row from one record; None for records without a timed measurement."""
    m = rec.get("measurement")
    if not isinstance(m, dict) or not isinstance(m.get("windows"), list):
        return None
    windows = [w if isinstance(w, dict) else {} for w in m["windows"]]
    samples = [s for s in (m.get("samples") or []) if _num(s) is not None]
    sm_median = _known(windows, "sm_clock_mhz_median")
    sm_min = _known(windows, "sm_clock_mhz_min")
    mem = _known(windows, "mem_clock_mhz_median")
    temp = _known(windows, "temperature_c_max")
    power = _known(windows, "power_w_mean")
    limit = _known(windows, "power_limit_w")
    bits = or_bits(int(b) for b in _known(windows, "throttle_bits_or"))
    backend, reason = str(m.get("telemetry_backend") or ""), str(m.get("telemetry_reason") or "")
    version = rec.get("_schema_version", data.RECORD_SCHEMAS.get(rec.get("schema"), 1))
    energy = _num(rec.get("energy_per_call_j"))
    if energy is not None:
        energy_note = ""
    elif version < 2 and "energy_per_call_j" not in rec:
        energy_note = "not recorded before schema 2 (kperf-record-2)"
    else:
        energy_note = f"no energy counter on this GPU's telemetry ({backend or 'none'})"
    key = data.record_key(rec)
    return {
        "benchmark": rec.get("benchmark"),
        "params": rec.get("params", {}),
        "machine": rec.get("machine"),
        "commit": rec.get("commit") or "",
        "env_name": rec.get("env_name") or "",
        "gpu": rec.get("gpu"),
        "recorded_at": rec.get("recorded_at"),
        "schema": rec.get("schema"),
        "source": rec.get("_source", ""),
        "point_id": data.point_id(key),
        "telemetry_backend": backend,
        "telemetry_reason": reason,
        "mode": m.get("mode"),
        "settled": m.get("settled"),
        "number": m.get("number"),
        "n_samples": len(samples),
        "time_median_s": statistics.median(samples) if samples else None,
        "time_min_s": min(samples) if samples else None,
        "time_max_s": max(samples) if samples else None,
        "n_readings": sum(int(w.get("n_readings") or 0) for w in windows),
        "sm_clock_median_mhz": statistics.median(sm_median) if sm_median else None,
        "sm_clock_min_mhz": min(sm_min) if sm_min else None,
        "mem_clock_median_mhz": statistics.median(mem) if mem else None,
        "temperature_max_c": max(temp) if temp else None,
        "power_mean_w": statistics.fmean(power) if power else None,
        "power_limit_w": statistics.median(limit) if limit else None,
        "energy_per_call_j": energy,
        "energy_note": energy_note,
        "energy_state": data.energy_state(rec),
        "tflops": _num(rec.get("tflops")),
        "gbps": _num(rec.get("gbps")),
        "throttle_bits_or": bits,
        "throttle_names": throttle_names(backend, reason, bits),
        "throttle_unusual": (bits & (environment or {}).get(backend, 0)) if bits else 0,
        "gpu_processes_note": record_note(rec),
        "gpu_shared": bool(record_others(rec)),
        "per_sample": [
            {"time_s": samples[i] if i < len(samples) else None,
             "sm_clock_median_mhz": w.get("sm_clock_mhz_median"),
             "sm_clock_min_mhz": w.get("sm_clock_mhz_min"),
             "temperature_max_c": w.get("temperature_c_max"),
             "power_mean_w": w.get("power_w_mean"),
             "power_limit_w": w.get("power_limit_w"),
             "energy_j": w.get("energy_j"),
             "throttle_bits_or": w.get("throttle_bits_or"),
             "n_readings": w.get("n_readings")}
            for i, w in enumerate(windows)
        ],
    }


def _known(windows: list[dict[str, Any]], key: str) -> list[float]:
    return [v for w in windows if (v := _num(w.get(key))) is not None]


def rows_of(records: list[dict[str, Any]], notes: data.Notes | None = None
            ) -> list[dict[str, Any]]:
    environment = environment_bits()
    rows = []
    for rec in records:
        try:
            row = summarize_record(rec, environment)
        except (TypeError, ValueError, AttributeError) as err:
            if notes is not None:
                notes.add(str(rec.get("_source", "?")), f"cannot be summarized ({err}): skipped")
            continue
        if row:
            rows.append(row)
    rows.sort(key=lambda r: (str(r["benchmark"]), json.dumps(r["params"], sort_keys=True),
                             str(r["machine"]), _num(r["recorded_at"]) or 0.0))
    return rows


def collect(records_root: Path | list[Path], notes: data.Notes | None = None
            ) -> list[dict[str, Any]]:
    """Page rows of every readable record under the root(s); the rest go to ``notes``."""
    notes = notes if notes is not None else data.Notes()
    roots = records_root if isinstance(records_root, list) else [records_root]
    return rows_of(data.read_records(roots, notes), notes)



EMPTY_REASON = ("No timed point has a record: records are written only by the GPU timing "
                "suites (*Time.track_time), so a CPU-only history (static figures and "
                "compile times) has none; a history published without its .asv/records "
                "folder has none either.")
MISSING_POINT = ("the record files of this point are not among the records published (a "
                 "failed or skipped case writes none; records from before this site kept "
                 "them are lost).")


def write_telemetry_pages(html_dir: str | Path, records_root: str | Path | None = None, *,
                          records: list[dict[str, Any]] | None = None,
                          notes: data.Notes | None = None, commit_url: str = "",
                          hash_length: int = 8) -> Path:
    """Write ``<html_dir>/kperf/telemetry.{html,json}``; returns the HTML path. Records
    come from ``records`` (already read) or from ``records_root``; unreadable ones are
    listed on the page."""
    notes = notes if notes is not None else data.Notes()
    if records is None:
        root = Path(records_root) if records_root is not None else record.record_root()
        records = data.read_records([root], notes)
    rows = rows_of(records, notes)
    payload = {"schema": SCHEMA, "n_records": len(records), "points": rows,
               "skipped": [{"where": w, "what": t} for w, t in notes.items],
               "commit_url": commit_url, "hash_length": hash_length,
               "empty_reason": EMPTY_REASON, "missing_point_reason": MISSING_POINT}
    out = Path(html_dir) / PAGE_DIR
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=True)
    (out / "telemetry.json").write_text(text)
    inline = json.dumps(payload, sort_keys=True).replace("<", "\\u003c")  # no "</script>"
    path = out / "telemetry.html"
    path.write_text(render("telemetry.html", title="Clocks and power per point",
                           here="telemetry", notes=notes, data_json=Markup(inline)))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", default="html", help="asv's html_dir")
    parser.add_argument("--records", default=None, help="records root (default: .asv/records)")
    args = parser.parse_args(argv)
    print(write_telemetry_pages(args.html, args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
