"""TileLang FP8 GEMM in the style of TileLang's examples/gemm_fp8: e4m3 shared tiles, T.gemm
into an fp32 fragment with B K-major (``transpose_B``), scales applied in a T.Parallel epilogue.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from kperf.ops import Build, Case, Target, compat

from .spec import check_dtype, fp8_format

OUT_TL_DTYPE = "bfloat16"


@dataclass(frozen=True)
class Config:
    block_M: int
    block_N: int
    block_K: int
    num_stages: int
    threads: int
    swizzle_panel: int = 0  # T.use_swizzle panel size; 0 disables the rasterization swizzle
    k_pack: int = 1  # AMD MFMA K packing (ROCm dialect only)
    # NVIDIA: sum each K block's wgmma result into a fresh fragment and add it to the fp32
    # accumulator (TileLang's examples/gemm_fp8 "2xAcc"): Hopper's fp8 accumulator keeps
    # too few mantissa bits for long K (without it the check failed at K=8192 on an H200,
    # 2026-12-01).
    promote: bool = False


# sm_90a: 128x128x128 e4m3 (32 KB a stage), 4 stages, 256 threads: two consumer warpgroups
# issuing wgmma e4m3 plus TileLang's TMA producer warpgroup; 128x128 because promotion keeps
# two accumulator tiles in registers.
# gfx942: TileLang's HIP path keeps one stage in LDS (no async copies; num_stages=2 gives the
# same code as 1), so 128x128x128 takes 32 KB of the 64 KB and two blocks fit per CU
# (code object, clang19, 2026-12-06); k_pack=2 feeds two 16x16x32 fp8 MFMA K-steps per LDS
# read, as in examples/gemm_fp8/example_tilelang_gemm_amd.py.
DEFAULTS = {
    "sm_90a": Config(block_M=128, block_N=128, block_K=128, num_stages=4, threads=256,
                     swizzle_panel=10, promote=True),
    "gfx942": Config(block_M=128, block_N=128, block_K=128, num_stages=2, threads=256,
                     swizzle_panel=8, k_pack=2),
}
# Decode-sized M: 64 rows (wgmma's M; one MFMA row block of four waves on gfx942), N tiles of
# 64 so N=8192 gives 128 blocks, long K steps for the weight stream. gfx942: one 64x64x256
# stage = 32 KB of LDS, num_stages=2 the same code as 1 (code object, 2026-12-06).
SMALL_M = {
    "sm_90a": Config(block_M=64, block_N=64, block_K=256, num_stages=4, threads=128,
                     promote=True),
    "gfx942": Config(block_M=64, block_N=64, block_K=256, num_stages=2, threads=256, k_pack=2),
}


def default_config(case: Case, target: Target) -> Config:
    table = SMALL_M if case.dims["M"] <= 64 else DEFAULTS
    return target.pick(table)


def scaled_matmul(M: int, N: int, K: int, cfg: Config, target: Target):
    """The ``T.prim_func`` for one shape: A [M,K], B as the [N,K] weight, scales [M,1], [1,N]."""
    T = compat.tilelang_language(target)
    gemm_kwargs = compat.tilelang_gemm_kwargs(target, cfg.k_pack)
    fp8, accum = fp8_format(target).tilelang_name, "float32"
    bM, bN, bK = cfg.block_M, cfg.block_N, cfg.block_K

    @T.prim_func
    def fp8_gemm(A: T.Tensor((M, K), fp8), B: T.Tensor((N, K), fp8),
                 A_scale: T.Tensor((M, 1), accum), B_scale: T.Tensor((1, N), accum),
                 C: T.Tensor((M, N), OUT_TL_DTYPE)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=cfg.threads) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), fp8)
            B_shared = T.alloc_shared((bN, bK), fp8)
            C_local = T.alloc_fragment((bM, bN), accum)
            C_block = T.alloc_fragment((bM, bN), accum)  # one K block's sum, when promoting
            if cfg.swizzle_panel:
                T.use_swizzle(cfg.swizzle_panel)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=cfg.num_stages):
                T.copy(A[by * bM, ko * bK], A_shared)
                T.copy(B[bx * bN, ko * bK], B_shared)
                if cfg.promote:
                    T.gemm(A_shared, B_shared, C_block, transpose_B=True, clear_accum=True,
                           **gemm_kwargs)
                    for i, j in T.Parallel(bM, bN):
                        C_local[i, j] += C_block[i, j]
                else:
                    T.gemm(A_shared, B_shared, C_local, transpose_B=True, **gemm_kwargs)
            # Out-of-range scale reads (M=16 in a 64-row block) are guarded by TileLang's
            # safe-memory pass; those rows are not stored.
            for i, j in T.Parallel(bM, bN):
                C_local[i, j] = C_local[i, j] * A_scale[by * bM + i, 0] * B_scale[0, bx * bN + j]
            T.copy(C_local, C[by * bM, bx * bN])

    return fp8_gemm


def _config(case: Case, target: Target, overrides: dict[str, Any]) -> Config:
    return replace(default_config(case, target), **overrides)


def _record(cfg: Config, target: Target) -> dict[str, Any]:
    return asdict(cfg) | {"fp8": fp8_format(target).tilelang_name}


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    """Compiled for the visible GPU; called with make_inputs' tensors (b is w.t())."""
    check_dtype(dtype)
    cfg = _config(case, target, overrides)
    d = case.dims
    kernel = compat.tilelang_compile(scaled_matmul(d["M"], d["N"], d["K"], cfg, target))

    def run(a, b, a_scale, b_scale):
        return kernel(a, b.t(), a_scale, b_scale)  # b.t() is the contiguous [N, K] weight

    return Build(fn=run, config=_record(cfg, target))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """gfx942: HIP source only (no hipcc here); sm_90a: a full nvcc compile to a cubin."""
    check_dtype(dtype)
    cfg = _config(case, target, overrides)
    d = case.dims
    func = scaled_matmul(d["M"], d["N"], d["K"], cfg, target)
    return compat.tilelang_artifacts(func, target) | {"config": _record(cfg, target)}
