"""LayerNorm: TileLang and Triton against torch.nn.functional.layer_norm."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_layernorm", "triton_layernorm")
