"""TileLang LayerNorm in the style of TileLang's examples/norm/layernorm.py: a block of rows per
program, the rows in a register fragment, mean and variance by T.reduce_sum."""

from __future__ import annotations

from kernels.rownorm import TileLangConfig, tilelang_row_config
from kperf.ops import Case, Target, compat

from .spec import EPS

TL_DTYPE = compat.TILELANG_DTYPE
Config = TileLangConfig


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    return tilelang_row_config("tilelang_layernorm", case, target, dtype)


def layer_norm(M: int, N: int, dtype: str, cfg: Config, target: Target, eps: float = EPS):
    """Return the ``T.prim_func`` for one shape and configuration."""
    T = compat.tilelang_language(target)
    io_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM = cfg.block_M

    @T.prim_func
    def layernorm(X: T.Tensor((M, N), io_dtype), W: T.Tensor((N,), io_dtype),
                  B: T.Tensor((N,), io_dtype), Y: T.Tensor((M, N), io_dtype)):
        with T.Kernel(T.ceildiv(M, bM), threads=cfg.threads) as bx:
            x = T.alloc_fragment((bM, N), io_dtype)
            centred = T.alloc_fragment((bM, N), accum_dtype)
            squares = T.alloc_fragment((bM, N), accum_dtype)
            mean = T.alloc_fragment((bM,), accum_dtype)
            rstd = T.alloc_fragment((bM,), accum_dtype)
            y = T.alloc_fragment((bM, N), io_dtype)
            T.copy(X[bx * bM, 0], x)
            for i, j in T.Parallel(bM, N):
                centred[i, j] = T.cast(x[i, j], accum_dtype)
            T.reduce_sum(centred, mean, dim=1)
            for i, j in T.Parallel(bM, N):
                centred[i, j] = centred[i, j] - mean[i] / N
                squares[i, j] = centred[i, j] * centred[i, j]
            T.reduce_sum(squares, rstd, dim=1)
            for i in T.Parallel(bM):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
            for i, j in T.Parallel(bM, N):
                y[i, j] = T.cast(centred[i, j] * rstd[i] * T.cast(W[j], accum_dtype)
                                 + T.cast(B[j], accum_dtype), io_dtype)
            T.copy(y, Y[bx * bM, 0])

    return layernorm


def prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    return layer_norm(case.dims["M"], case.dims["N"], dtype, cfg, target)


build, aot = compat.tilelang_entry_points(prim_func, default_config)
