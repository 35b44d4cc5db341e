"""Is a process's first cold compile slower than its next ones? (Why the compile suites
compile once, untimed, in ``setup``.) One fresh process per op, target and backend:

    python tools/experiments/first_compile.py gemm sm_90a triton
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tilelang  # noqa: F401 - imported first, as in asv's fork server (KPERF_PREIMPORT)
import torch  # noqa: F401
import triton  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import _suites
from kernels.registry import get_op
from kernels.targets import get_target

CASES = {"gemm": "square-4096", "attention": "llama3-8b.prefill-4k", "rmsnorm": "llama3-8b.hidden"}


def main(op_name: str, target: str, backend: str, compiles: int = 4) -> dict:
    suite = _suites._CompileTime()
    op = get_op(op_name)
    suite.case_def, suite.be = op.case(CASES[op_name]), op.backend(backend, CASES[op_name])
    suite.target = get_target(target)
    seconds = [suite._cold_compile("fp16")[0] for _ in range(compiles)]
    return {"op": op_name, "target": target, "backend": backend,
            "seconds": [round(s, 3) for s in seconds]}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
