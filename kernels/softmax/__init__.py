"""Softmax: TileLang and Triton against torch.softmax."""

from __future__ import annotations

from kperf.ops import op_from_modules

OP = op_from_modules(__name__, "bandwidth", "tilelang_softmax", "triton_softmax")
