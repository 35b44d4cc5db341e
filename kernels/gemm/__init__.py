"""GEMM: TileLang and Triton against torch.matmul (cuBLAS / hipBLASLt)."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "compute", "tilelang_gemm", "triton_gemm")
