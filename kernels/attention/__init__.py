"""Flash-attention forward: TileLang and Triton against torch SDPA's flash backend."""

from __future__ import annotations

from kernels.op import Backend, Build, Case, OpDef
from kernels.targets import Target

from . import reference, spec


def _build_triton(case: Case, dtype: str, target: Target) -> Build:
    from . import triton_attention

    return triton_attention.build(case, dtype, target)


def _aot_triton(case: Case, dtype: str, target: Target) -> dict:
    from . import triton_attention

    return triton_attention.aot(case, dtype, target)


def _build_tilelang(case: Case, dtype: str, target: Target) -> Build:
    from . import tilelang_attention

    return tilelang_attention.build(case, dtype, target)


def _aot_tilelang(case: Case, dtype: str, target: Target) -> dict:
    from . import tilelang_attention

    return tilelang_attention.aot(case, dtype, target)


def _unsupported() -> dict[tuple[str, str], str]:
    """The TileLang kernel has no edge masking: S must be a whole number of its blocks.

    ``tilelang_attention`` imports no compiler at module level, so this stays cheap.
    """
    from .tilelang_attention import SEQ_MULTIPLE

    return {("tilelang", c.name): f"S={c.dims['S']} is not a multiple of {SEQ_MULTIPLE} "
            "(the TileLang kernel has no edge masking)"
            for c in spec.CASES if c.dims["S"] % SEQ_MULTIPLE}


OP = OpDef(
    name="attention",
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
    unsupported=_unsupported(),
)
