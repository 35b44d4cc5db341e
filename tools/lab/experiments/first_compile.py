"""Is a process's first cold compile slower than its next ones? (Why the compile suites
compile once, untimed, in ``setup``.) One fresh process per op, target and backend:

    python tools/lab/experiments/first_compile.py gemm sm_90a triton
    python tools/lab/experiments/first_compile.py gemm sm_90a triton rmsnorm   # primed first

With a fourth argument, the process first compiles that op's kernel (same target and
backend, untimed): does a small kernel's compile pay the one-off initialisation for the
op's own?
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tilelang  # noqa: F401 - imported first, as in asv's fork server (KPERF_PREIMPORT)
import torch  # noqa: F401
import triton  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from kperf.ops.registry import get_op
from kperf.ops.targets import get_target
from kperf.suites import cpu

CASES = {"gemm": "square-4096", "attention": "llama3-8b.prefill-4k", "rmsnorm": "llama3-8b.hidden"}


def compile_suite(op_name: str, target: str, backend: str) -> cpu._CompileTime:
    suite = cpu._CompileTime()
    op = get_op(op_name)
    suite.case_def, suite.be = op.case(CASES[op_name]), op.backend(backend, CASES[op_name])
    suite.target = get_target(target)
    return suite


def cold_seconds(suite: cpu._CompileTime) -> float:
    return suite._compile_cold(suite.be, suite.case_def, "fp16")[0]


def main(op_name: str, target: str, backend: str, primer: str = "",
         compiles: int = 4) -> dict:
    out: dict = {"op": op_name, "target": target, "backend": backend}
    if primer:
        out["primer"] = primer
        first = compile_suite(primer, target, backend)
        out["primer_s"] = round(cold_seconds(first), 3)
    suite = compile_suite(op_name, target, backend)
    out["seconds"] = [round(cold_seconds(suite), 3) for _ in range(compiles)]
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
