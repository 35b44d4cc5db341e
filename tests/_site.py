"""What the site's tests share: a hostile string, a kperf record and a results file."""

from __future__ import annotations

from kperf.site import data

HOSTILE = '<script>window.__x=1</script>"&\'<img src=x onerror=alert(1)>'


def _record(commit: str = "a" * 40, schema: str = "kperf-record-2", **extra) -> dict:
    rec = {"schema": schema, "benchmark": "bench_gemm.GemmTime.track_time",
           "params": {"case": "square-4096", "dtype": "fp16", "backend": "triton"},
           "machine": "m1", "commit": commit, "env_name": "env",
           "tflops": 600.0, "gbps": 400.0,
           "measurement": {"samples": [1e-4, 1.1e-4, 1.2e-4], "number": 10,
                           "telemetry_backend": "nvml", "telemetry_reason": "x",
                           "windows": [{"n_readings": 2, "sm_clock_mhz_median": 1400.0,
                                        "power_w_mean": 600.0, "power_limit_w": 700.0,
                                        "energy_j": 6.0, "throttle_bits_or": 4}] * 3}}
    if schema == "kperf-record-2":
        rec["energy_per_call_j"] = 0.06
    rec.update(extra)
    return rec


def _files(values: dict[str, list], commit: str = "c" * 40, machine: str = "m1"
           ) -> data.ResultFile:
    row = {"result": [values[b] for b in ("tilelang", "triton", "torch")],
           "params": [["'square-4096'"], ["'fp16'"], ["'tilelang'", "'triton'", "'torch'"]]}
    return data.ResultFile(machine=machine, commit=commit, env_name="env", date=1,
                           label="x", results={"bench_gemm.GemmTime.track_time": row})
