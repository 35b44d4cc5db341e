"""How much a cold compile's wall time and CPU time move on this host, now.

    python -m tools.lab.compile_spread --op gemm --backend tilelang --target gfx942 -n 8
    python -m tools.lab.compile_spread --op gemm --backend triton --target sm_90a --json out.json

Compiles one kernel ``-n`` times with empty caches in this process (after one untimed
compile), the way the compile suites and the gate's compile blocks do
(``kperf/suites/static.py`` ``cold_compile``), and prints each compile's wall and CPU
seconds, their medians and coefficients of variation, and the host's load average: the
evidence for judging compiles by CPU seconds on a shared host (docs/perf.md, "Compile
time on a shared host").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def spread(values: list[float]) -> float:
    """Standard deviation over the mean (0 for fewer than two values)."""
    return statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def measure(op: str, case: str | None, backend: str, target: str, dtype: str, n: int,
            toolchain: str | None) -> dict:
    from kperf.core.worker import register_package

    register_package(REPO / "benchmarks" / "__init__.py")
    from kperf.suites.cpu import _CompileTime
    from kperf.suites.static import _kernel, cold_compile

    be, case_def, tgt = _kernel(op, case or _representative(op), backend, target)
    cold_compile(be, case_def, dtype, tgt, toolchain)  # untimed: the process's first
    runs = []
    for _ in range(n):
        load = os.getloadavg()[0]
        compiled = cold_compile(be, case_def, dtype, tgt, toolchain)
        runs.append({"wall_s": compiled.wall_s, "cpu_s": compiled.cpu_s, "load1": load})
    wall, cpu = [r["wall_s"] for r in runs], [r["cpu_s"] for r in runs]
    return {"kernel": f"{op}/{case_def.name}/{dtype}/{backend}@{target}"
                      + (f" [{toolchain}]" if toolchain else ""),
            "primer": _CompileTime.__name__, "runs": runs,
            "wall_median_s": statistics.median(wall), "cpu_median_s": statistics.median(cpu),
            "wall_cov": spread(wall), "cpu_cov": spread(cpu),
            "load1_median": statistics.median(r["load1"] for r in runs),
            "cores": os.cpu_count()}


def _representative(op: str) -> str:
    """The case the op's compile suite compiles (its bench module's ``<Op>Compile``)."""
    import importlib

    module = importlib.import_module(f"benchmarks.bench_{op}")
    return next(v.case for k, v in vars(module).items() if k.endswith("Compile"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", required=True)
    parser.add_argument("--case", help="default: the op's compile suite's case")
    parser.add_argument("--backend", choices=("tilelang", "triton"), required=True)
    parser.add_argument("--target", choices=("gfx942", "sm_90a"), required=True)
    parser.add_argument("--dtype", default="fp16")
    parser.add_argument("--toolchain", help="gfx942 toolchain (default: the run's)")
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    out = measure(args.op, args.case, args.backend, args.target, args.dtype, args.n,
                  args.toolchain)
    for i, r in enumerate(out["runs"], 1):
        print(f"{i:2d}  wall {r['wall_s']:7.3f} s  cpu {r['cpu_s']:7.3f} s  load {r['load1']:.1f}")
    print(f"{out['kernel']}: wall median {out['wall_median_s']:.3f} s, CoV "
          f"{100 * out['wall_cov']:.1f}%; CPU median {out['cpu_median_s']:.3f} s, CoV "
          f"{100 * out['cpu_cov']:.1f}%; load average {out['load1_median']:.1f} on "
          f"{out['cores']} cores")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
