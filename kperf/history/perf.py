"""Head-to-head: every op x case x dtype x backend on this GPU, with same-run baselines.

    kperf perf --ops gemm --cases square-4096,square-8192 --out perf.json
    kperf perf --markdown perf.md   # all ops, their default cases
    kperf perf --ops softmax --per-op 1 --dtypes fp16 \
        --variants '{"triton": [{"programs_per_sm": 1}, {"programs_per_sm": 2}]}'

Each case is verified against its reference, then timed by the measurement core with
telemetry, in a measurement worker of the run's own (kperf/core/worker.py, as the gate's
and asv's cases): a crash, hang, wrong or NaN result is that case's failure and the run
goes on with a fresh worker where the last one died. The HBM copy bandwidth is measured
in the same run, as the roofline of bandwidth-bound ops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kperf.core.telemetry import or_bits
from kperf.core.worker import RemoteError, WorkerClient, WorkerError, WorkerSpec, run_workers
from kperf.specs import CaseSpec

COPY_BYTES = 1 << 30


def run_case(spec: CaseSpec) -> dict[str, Any]:
    """Worker side: prepare (build + verify) and time one case through the same runner as
    asv's suites and the gate (kperf/suites/case.py); returns a JSON-able dict."""
    from kperf.suites.case import CaseRunner

    runner = CaseRunner()
    plan = spec.get("plan") or {}
    if spec["op"] == "hbm-copy":
        result = runner.measure_prepared(copy_case(), plan)
    else:
        result = runner.measure(spec, plan)
    m = result["measurement"]
    clocks = [w["sm_clock_mhz_median"] for w in m["windows"] if w["sm_clock_mhz_median"]]
    bits = or_bits(w["throttle_bits_or"] for w in m["windows"]) or 0
    return {
        **spec, **{k: result[k] for k in ("median_s", "samples", "number", "tflops", "gbps",
                                         "config", "first_call_s", "max_abs_err", "gpu",
                                         "energy_per_call_j")},
        "mode": m["mode"], "settled": m["settled"], "warmup_s": m["warmup_s"],
        "sm_clock_mhz": statistics.median(clocks) if clocks else None,
        "sm_clock_mhz_range": [min(clocks), max(clocks)] if clocks else None,
        "throttle_bits": bits, "telemetry": m["telemetry_backend"], "windows": m["windows"],
    }


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """The worker's handler: one case (``request["spec"]``) prepared, checked and timed."""
    return run_case(request["spec"])


def measure(client: WorkerClient, spec: CaseSpec, timeout_s: float
            ) -> tuple[str, dict[str, Any] | None, str]:
    """(status, result, error) of one case in the worker: ok, error (it raised: a wrong or
    NaN result, a compile error), skipped, or failed (the worker died or hung: killed)."""
    try:
        return "ok", client.request({"spec": spec}, timeout_s), ""
    except RemoteError as err:
        return "error", None, str(err)
    except NotImplementedError as err:  # RemoteSkip: the case does not apply here
        return "skipped", None, str(err)
    except WorkerError as err:
        return "failed", None, str(err)


def copy_case():
    """A 1 GiB device-to-device copy: the bandwidth roofline of this run."""
    import torch

    from kperf.core.checks import Agreement
    from kperf.core.prepare import Prepared

    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    return Prepared(what="hbm-copy/1GiB/fp32/torch", calls=[lambda: dst.copy_(src)],
                    config={"library": "torch copy_"}, agreement=Agreement(0.0, 0.0, 0, 0),
                    flops=0.0, bytes_moved=2.0 * COPY_BYTES, first_call_s=0.0)


def default_cases(op, per_op: int) -> list[str]:
    return [c.name for c in op.cases[:per_op]]


def parse_variants(text: str | None) -> dict[str, list[dict[str, Any]]]:
    """``{"backend": [{field: value, ...}, ...]}``: configurations timed besides the default."""
    if not text:
        return {}
    try:
        variants = json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"--variants: not JSON: {err}") from None
    if not isinstance(variants, dict) or not all(
            isinstance(v, list) and all(isinstance(o, dict) for o in v) for v in variants.values()):
        raise SystemExit('--variants: expected {"backend": [{"field": value}, ...]}')
    return variants


def label(spec: CaseSpec) -> str:
    """The backend, with the configuration fields a variant overrides."""
    overrides = spec.get("overrides")
    if not overrides:
        return spec["backend"]
    return spec["backend"] + " {" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + "}"


def plan_specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    from kperf.ops.registry import get_op, op_names

    variants = parse_variants(args.variants)
    specs: list[CaseSpec] = [{"op": "hbm-copy", "case": "1GiB", "dtype": "fp32",
                                    "backend": "torch"}]
    for name in args.ops.split(",") if args.ops else op_names():
        op = get_op(name)
        cases = args.cases.split(",") if args.cases else default_cases(op, args.per_op)
        dtypes = args.dtypes.split(",") if args.dtypes else list(op.dtypes)
        backends = args.backends.split(",") if args.backends else [
            op.baseline, *[b for b in ("tilelang", "triton") if b != op.baseline]]
        for case in cases:
            if case not in {c.name for c in op.cases}:
                raise SystemExit(f"op {name!r} has no case {case!r}")
            for dtype in dtypes:
                for backend in backends:
                    specs.append({"op": name, "case": case, "dtype": dtype, "backend": backend})
                    specs.extend({"op": name, "case": case, "dtype": dtype, "backend": backend,
                                  "overrides": o} for o in variants.get(backend, []))
    plan = json.loads(args.plan) if args.plan else {}
    return [dict(s, plan=plan) for s in specs]


def attach_baselines(rows: list[dict[str, Any]]) -> None:
    """Ratios measured in the same run: vs the op's baseline backend, and vs HBM copy."""
    from kperf.ops.registry import class_of, get_op

    copy = next((r for r in rows if r["op"] == "hbm-copy" and r["status"] == "ok"), None)
    by_key = {(r["op"], r["case"], r["dtype"], r["backend"]): r for r in rows
              if not r.get("overrides")}
    for r in rows:
        if r["status"] != "ok" or r["op"] == "hbm-copy":
            continue
        op = get_op(r["op"])
        base = by_key.get((r["op"], r["case"], r["dtype"], op.baseline))
        if base and base["status"] == "ok":
            r["vs_baseline"] = base["median_s"] / r["median_s"]
        if copy:
            r["vs_copy_bw"] = r["gbps"] / copy["gbps"]
        r["bound"] = class_of(op, r["case"])


def to_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"Measured on {meta['gpu']} at {meta['date']} (wall {meta['wall_s']:.0f} s); "
             "median of per-trial medians; ratios from the same run.", "",
             "| op | case | dtype | backend | status | median | TFLOP/s | GB/s | vs baseline "
             "| vs copy BW | SM MHz | first call s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['op']} | {r['case']} | {r['dtype']} | {label(r)} | "
                         f"{r['status']}: {r['error'].splitlines()[0][:80]} |||||||")
            continue
        def fmt(key: str, pattern: str, row: dict[str, Any] = r) -> str:
            return pattern.format(row[key]) if row.get(key) is not None else ""

        lines.append(
            f"| {r['op']} | {r['case']} | {r['dtype']} | {label(r)} | ok | "
            f"{r['median_s'] * 1e6:.1f} us | {r['tflops']:.1f} | {r['gbps']:.0f} | "
            f"{fmt('vs_baseline', '{:.3f}')} | {fmt('vs_copy_bw', '{:.3f}')} | "
            f"{fmt('sm_clock_mhz', '{:.0f}')} | {r['first_call_s']:.2f} |")
    return "\n".join(lines) + "\n"


def run_specs(specs: list[CaseSpec], args: argparse.Namespace,
              handler: str = "kperf.history.perf:handle") -> list[dict[str, Any]]:
    """Every case in the run's worker, printed and written as it ends."""
    from kperf import project

    rows: list[dict[str, Any]] = []
    # the worker runs in its folder: it finds this project by name, not from its cwd
    env = {**os.environ, project.PROJECT_ENV: str(project.find().root)}
    client = WorkerClient(WorkerSpec(handler, tuple(sys.path), label="kperf perf"), env=env)
    for spec in specs:
        # a fresh worker (the first, or one after a case that ended the last): its imports
        first = not rows or rows[-1]["status"] in ("failed", "error")
        status, result, error = measure(client, spec, args.timeout + (120 if first else 0))
        row = {**result, "status": "ok", "error": ""} if result is not None else {
            **spec, "status": status, "error": error}
        rows.append(row)
        summary = (f"{row['median_s'] * 1e6:10.1f} us {row['tflops']:7.1f} TFLOP/s "
                   f"{row['gbps']:7.0f} GB/s" if row["status"] == "ok"
                   else f"{row['status'].upper()}: {row['error'].splitlines()[0][:160]}")
        print(f"{spec['op']:>10} {spec['case']:<32} {spec['dtype']:<8} {label(spec):<9} "
              f"{summary}", flush=True)
        args.out.write_text(json.dumps({"meta": {"partial": True}, "rows": rows}, indent=1))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op names (default: all)")
    parser.add_argument("--cases", help="comma-separated case names (default: first --per-op)")
    parser.add_argument("--per-op", type=int, default=2)
    parser.add_argument("--dtypes")
    parser.add_argument("--backends")
    parser.add_argument("--variants", help='JSON {"backend": [{"config field": value}, ...]}: '
                        "configurations timed besides each backend's default")
    parser.add_argument("--plan",
                        help='JSON overrides of kperf.core.timing.Plan, e.g. {"trials":5}')
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--out", type=Path, default=Path("perf.json"))
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)

    specs = plan_specs(args)
    start = time.time()
    # cold compiler caches: first_call_s is a compile time, not a cache hit; removed after,
    # and so is the run's worker (run_workers)
    with tempfile.TemporaryDirectory(prefix="kperf-perf-cache-") as cache, \
            run_workers("kperf-perf-"):
        os.environ["TRITON_CACHE_DIR"] = str(Path(cache) / "triton")
        os.environ["TILELANG_CACHE_DIR"] = str(Path(cache) / "tilelang")
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        rows = run_specs(specs, args)
    attach_baselines(rows)
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), "unknown GPU")
    meta = {"gpu": gpu, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start)),
            "wall_s": time.time() - start}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if args.markdown:
        args.markdown.write_text(to_markdown(rows, meta))
    failed = [r for r in rows if r["status"] != "ok"]
    print(f"{len(rows) - len(failed)} ok, {len(failed)} failed; wall {meta['wall_s']:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
