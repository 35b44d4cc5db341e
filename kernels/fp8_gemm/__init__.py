"""FP8 e4m3 GEMM with row-wise scales: TileLang and Triton against torch._scaled_mm.

Input dtype "fp8e4m3" (e4m3fn on NVIDIA, e4m3fnuz on AMD gfx942), fp32 accumulate, bf16 out.
"""

from __future__ import annotations

from kernels.op import Backend, Build, Case, OpDef
from kernels.targets import Target

from . import reference, spec


def _build_triton(case: Case, dtype: str, target: Target) -> Build:
    from . import triton_fp8_gemm

    return triton_fp8_gemm.build(case, dtype, target)


def _aot_triton(case: Case, dtype: str, target: Target) -> dict:
    from . import triton_fp8_gemm

    return triton_fp8_gemm.aot(case, dtype, target)


def _build_tilelang(case: Case, dtype: str, target: Target) -> Build:
    from . import tilelang_fp8_gemm

    return tilelang_fp8_gemm.build(case, dtype, target)


def _aot_tilelang(case: Case, dtype: str, target: Target) -> dict:
    from . import tilelang_fp8_gemm

    return tilelang_fp8_gemm.aot(case, dtype, target)


OP = OpDef(
    name="fp8_gemm",
    bound="compute",
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
    # Triton 3.7.1's interpreter runs fp8e4m3 (OCP fn) -> fp32 dots exactly; fnuz it cannot load.
    test_dtypes=spec.DTYPES,
)
