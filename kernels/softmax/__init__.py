"""Softmax: TileLang and Triton against torch.softmax."""

from __future__ import annotations

from kernels.op import Backend, Build, Case, OpDef
from kernels.targets import Target

from . import reference, spec


def _build_triton(case: Case, dtype: str, target: Target) -> Build:
    from . import triton_softmax

    return triton_softmax.build(case, dtype, target)


def _aot_triton(case: Case, dtype: str, target: Target) -> dict:
    from . import triton_softmax

    return triton_softmax.aot(case, dtype, target)


def _build_tilelang(case: Case, dtype: str, target: Target) -> Build:
    from . import tilelang_softmax

    return tilelang_softmax.build(case, dtype, target)


def _aot_tilelang(case: Case, dtype: str, target: Target) -> dict:
    from . import tilelang_softmax

    return tilelang_softmax.aot(case, dtype, target)


OP = OpDef(
    name="softmax",
    bound="bandwidth",
    cases=spec.CASES,
    dtypes=spec.DTYPES,
    make_inputs=reference.make_inputs,
    reference=reference.reference,
    flops=spec.flops,
    bytes_moved=spec.bytes_moved,
    backends={
        "tilelang": Backend("tilelang", _build_tilelang, _aot_tilelang),
        "triton": Backend("triton", _build_triton, _aot_triton),
        "torch": Backend("torch", reference.build_torch),
    },
    tolerance=spec.TOLERANCE,
    baseline="torch",
    test_cases=spec.TEST_CASES,
)
