"""Flash-attention forward: TileLang and Triton against torch SDPA's flash backend."""

from __future__ import annotations

from kperf.ops import op_from_modules

from . import spec


def _unsupported() -> dict[tuple[str, str], str]:
    """The TileLang kernel has no edge masking: S must be a whole number of its blocks.

    ``tilelang_attention`` imports no compiler at module level, so this stays cheap.
    """
    from .tilelang_attention import SEQ_MULTIPLE

    return {("tilelang", c.name): f"S={c.dims['S']} is not a multiple of {SEQ_MULTIPLE} "
            "(the TileLang kernel has no edge masking)"
            for c in spec.CASES if c.dims["S"] % SEQ_MULTIPLE}


OP = op_from_modules(__name__, "compute", "tilelang_attention", "triton_attention",
                     unsupported=_unsupported())
