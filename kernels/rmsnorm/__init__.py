"""RMSNorm: TileLang and Triton against torch.nn.functional.rms_norm."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_rmsnorm", "triton_rmsnorm")
