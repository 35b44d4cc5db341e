"""RoPE: rotary position embedding of queries or keys, TileLang and Triton against torch."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_rope", "triton_rope")
