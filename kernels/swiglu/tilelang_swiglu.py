"""TileLang SwiGLU in the style of TileLang's examples/elementwise: 2-D tiles copied to
register fragments, silu(x) * g by T.Parallel, the tile copied back."""

from __future__ import annotations

from dataclasses import dataclass

from kperf.ops import Case, Target, compat

TL_DTYPE = compat.TILELANG_DTYPE


@dataclass(frozen=True)
class Config:
    block_M: int
    block_N: int
    threads: int


# sm_90a: 4 x 1024 tiles over 256 threads, 16 elements (two 16-byte loads) a thread.
# gfx942: the same tile over 256 threads = 4 wave64s.
DEFAULTS = {
    "sm_90a": Config(block_M=4, block_N=1024, threads=256),
    "gfx942": Config(block_M=4, block_N=1024, threads=256),
}


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    return target.pick(DEFAULTS)


def swiglu(M: int, N: int, dtype: str, cfg: Config, target: Target):
    """Return the ``T.prim_func`` for one shape and configuration; edge tiles are guarded."""
    T = compat.tilelang_language(target)
    io_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM, bN = cfg.block_M, cfg.block_N

    @T.prim_func
    def swiglu_kernel(X: T.Tensor((M, N), io_dtype), G: T.Tensor((M, N), io_dtype),
                      Y: T.Tensor((M, N), io_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=cfg.threads) as (bx, by):
            x = T.alloc_fragment((bM, bN), io_dtype)
            g = T.alloc_fragment((bM, bN), io_dtype)
            y = T.alloc_fragment((bM, bN), io_dtype)
            T.copy(X[by * bM, bx * bN], x)
            T.copy(G[by * bM, bx * bN], g)
            for i, j in T.Parallel(bM, bN):
                y[i, j] = T.cast(T.cast(x[i, j], accum_dtype)
                                 / (1.0 + T.exp(-T.cast(x[i, j], accum_dtype)))
                                 * T.cast(g[i, j], accum_dtype), io_dtype)
            T.copy(y, Y[by * bM, bx * bN])

    return swiglu_kernel


def prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    return swiglu(case.dims["M"], case.dims["N"], dtype, cfg, target)


build, aot = compat.tilelang_entry_points(prim_func, default_config)
