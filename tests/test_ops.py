"""Every op, every backend: the contract and its benchmark file, the Triton interpreter,
and code generation, through the checks every project runs (kperf/testing.py).

These run over whatever ops exist in ``kernels/``, so a new op folder is covered by
adding it, and a broken one fails here by name.
"""

from __future__ import annotations

import pytest

from kperf import testing
from kperf.core import hip

OPS = testing.ops()


def test_there_are_ops():
    assert "gemm" in OPS


@pytest.mark.parametrize("op_name", OPS)
def test_contract(op_name):
    testing.assert_checked(op_name)


@pytest.mark.parametrize("op_name", OPS)
def test_triton_interpreter(op_name):
    assert testing.assert_interprets(op_name), "no interpreter cases ran"


@pytest.mark.parametrize(("op_name", "backend", "target"), testing.codegen_cases(OPS))
def test_codegen(op_name, backend, target):
    """Compile ahead of time for gfx942 and sm_90a, down to a device binary, and read the
    static figures: both languages give a gfx942 code object and every figure from it."""
    artifacts, figures = testing.assert_compiles(op_name, backend, target)
    assert figures.get("shared_bytes", 0) >= 0
    if target.startswith("gfx"):
        assert figures["vgpr_spills"] >= 0 and figures["scratch_bytes"] >= 0, figures
        if op_name in ("gemm", "fp8_gemm", "attention"):
            assert figures["isa.matrix"] > 0, f"{op_name}/{backend}: no matrix-core instruction"
        if backend == "tilelang":
            assert artifacts["toolchain"] == hip.toolchain_name(target)
