"""FP8 e4m3 GEMM with row-wise scales: TileLang and Triton against torch._scaled_mm.

Input dtype "fp8e4m3" (e4m3fn on NVIDIA, e4m3fnuz on AMD gfx942), fp32 accumulate, bf16 out.
"""

from __future__ import annotations

from kperf.ops import op_from_modules

from . import spec

# Triton 3.7.1's interpreter runs fp8e4m3 (OCP fn) -> fp32 dots exactly; fnuz it cannot load.
OP = op_from_modules(__name__, "compute", "tilelang_fp8_gemm", "triton_fp8_gemm",
                     test_dtypes=spec.DTYPES)
