"""TileLang GEMM in the style of TileLang's examples/gemm: shared-memory tiles, pipelined K loop
(several stages on sm_90a only; see DEFAULTS)."""

from __future__ import annotations

from dataclasses import dataclass

from kperf.ops import Case, Target, compat

TL_DTYPE = compat.TILELANG_DTYPE


@dataclass(frozen=True)
class Config:
    block_M: int
    block_N: int
    block_K: int
    num_stages: int
    threads: int
    swizzle_panel: int = 0  # T.use_swizzle panel size; 0 disables the rasterization swizzle
    k_pack: int = 1  # AMD MFMA K packing (ROCm dialect only)


# sm_90a: 128x256x64, 4 stages, 256 threads (2 consumer warpgroups + TMA producer), swizzle 10.
# gfx942: 4 wave64s per block (256 threads); k_pack=2 feeds the 16x16x16 MFMA two K-steps per
# LDS read. num_stages does nothing on gfx942: TileLang 0.1.15 emits the same HIP source for 1, 2
# and 3 (it pipelines only on gfx950), so LDS holds one 128x128x32 stage: 16 KB of the 64 KB;
# 144 VGPRs, occupancy 3 waves, limited by VGPRs (code object, clang19, 2026-12-06).
DEFAULTS = {
    "sm_90a": Config(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256,
                     swizzle_panel=10),
    "gfx942": Config(block_M=128, block_N=128, block_K=32, num_stages=3, threads=256,
                     swizzle_panel=8, k_pack=2),
}
# gfx942 decode: num_stages=2 gives the same code as 1; one 32x64x128 stage = 24 KB of LDS,
# occupancy 2 waves, limited by LDS (code object, clang19, 2026-12-06).
SMALL_M = {
    "sm_90a": Config(block_M=64, block_N=64, block_K=128, num_stages=4, threads=128),
    "gfx942": Config(block_M=32, block_N=64, block_K=128, num_stages=2, threads=256),
}


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    table = SMALL_M if case.dims["M"] <= 64 else DEFAULTS
    return target.pick(table)


def matmul(M: int, N: int, K: int, dtype: str, cfg: Config, target: Target):
    """Return the ``T.prim_func`` for one shape and configuration."""
    T = compat.tilelang_language(target)
    gemm_kwargs = compat.tilelang_gemm_kwargs(target, cfg.k_pack)
    in_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM, bN, bK = cfg.block_M, cfg.block_N, cfg.block_K

    @T.prim_func
    def gemm(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype),
             C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=cfg.threads) as (bx, by):
            A_shared = T.alloc_shared((bM, bK), in_dtype)
            B_shared = T.alloc_shared((bK, bN), in_dtype)
            C_local = T.alloc_fragment((bM, bN), accum_dtype)
            if cfg.swizzle_panel:
                T.use_swizzle(cfg.swizzle_panel)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, bK), num_stages=cfg.num_stages):
                T.copy(A[by * bM, ko * bK], A_shared)
                T.copy(B[ko * bK, bx * bN], B_shared)
                T.gemm(A_shared, B_shared, C_local, **gemm_kwargs)
            T.copy(C_local, C[by * bM, bx * bN])

    return gemm


def prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    d = case.dims
    return matmul(d["M"], d["N"], d["K"], dtype, cfg, target)


build, aot = compat.tilelang_entry_points(prim_func, default_config)
