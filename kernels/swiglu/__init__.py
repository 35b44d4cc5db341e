"""SwiGLU: TileLang and Triton against F.silu(x) * g in torch."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_swiglu", "triton_swiglu")
