"""Every op, every backend: the contract, the Triton interpreter, and code generation.

These run over whatever ops exist in ``kernels/``, so a new op folder is covered by
adding it, and a broken one fails here by name.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from harness import hip, static
from kernels.registry import get_op, op_names
from kernels.targets import TARGETS

from .conftest import REPO

OPS = op_names()


def _bench_time_params(op_name: str) -> list | None:
    """The literal params of the op's _TimeSuite subclass in benchmarks/bench_<op>.py."""
    path = REPO / "benchmarks" / f"bench_{op_name}.py"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", "") == "_TimeSuite" for b in node.bases):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and stmt.targets[0].id == "params":
                    return ast.literal_eval(stmt.value)
    return None


def test_there_are_ops():
    assert "gemm" in OPS


@pytest.mark.parametrize("op_name", OPS)
def test_contract(op_name):
    op = get_op(op_name)
    assert {"tilelang", "triton", op.baseline} <= set(op.backends), op.backends.keys()
    assert op.cases and op.test_cases, "an op needs real cases and small CPU test cases"
    assert len({c.name for c in op.cases}) == len(op.cases), "case names must be unique"
    assert op.bound in ("compute", "bandwidth", "launch")
    for case in op.cases:
        assert op.flops(case) >= 0 and op.bytes_moved(case, op.dtypes[0]) > 0, case.name
    params = _bench_time_params(op_name)
    assert params is not None, f"benchmarks/bench_{op_name}.py has no _TimeSuite subclass"
    cases, dtypes, backends = params
    assert cases == [c.name for c in op.cases], "bench params must list the spec's cases"
    assert dtypes == list(op.dtypes)
    assert set(backends) <= set(op.backends)


@pytest.mark.parametrize("op_name", OPS)
def test_triton_interpreter(op_name):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, str(REPO / "tests" / "_interpret_op.py"), op_name],
                         capture_output=True, text=True, env=env, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert results, "no interpreter cases ran"
    failed = [r for r in results if not r["ok"]]
    assert not failed, json.dumps(failed, indent=1)[:4000]


CODEGEN = [(op, be, tgt) for op in OPS for be in ("tilelang", "triton") for tgt in TARGETS]


@pytest.mark.parametrize(("op_name", "backend", "target"), CODEGEN)
def test_codegen(op_name, backend, target):
    """Compile ahead of time for gfx942 and sm_90a, down to a device binary, and read the
    static figures: both languages give a gfx942 code object and every figure from it."""
    op = get_op(op_name)
    case = op.cases[0]
    tgt = TARGETS[target]
    aot = op.backend(backend, case.name).aot(case, op.dtypes[0], tgt)
    artifacts = hip.with_code_object(aot, tgt.vendor, tgt.arch)
    figures = static.figures(artifacts, tgt.vendor)
    assert figures["registers"] > 0 and figures["occupancy"] >= 1, figures
    assert figures["occupancy_limit"], figures
    assert figures.get("shared_bytes", 0) >= 0
    if tgt.vendor == "amd":
        assert artifacts["hsaco"][:4] == b"\x7fELF", "no gfx942 code object"
        assert figures["code_bytes"] > 0 and figures["isa.instructions"] > 0, figures
        assert figures["vgpr_spills"] >= 0 and figures["scratch_bytes"] >= 0, figures
        if op_name in ("gemm", "fp8_gemm", "attention"):
            assert figures["isa.matrix"] > 0, f"{op_name}/{backend}: no matrix-core instruction"
        if backend == "tilelang":
            assert artifacts["toolchain"] == hip.toolchain_name()
    else:
        assert "cubin" in artifacts, "nvcc / Triton built no sm_90a cubin"
