"""TileLang RoPE in the style of TileLang's elementwise examples: a block of tokens and
one head a thread block; each half read into a register fragment, rotated by T.Parallel
in fp32, written back."""

from __future__ import annotations

from dataclasses import dataclass

from kperf.ops import Case, Target, compat

TL_DTYPE = compat.TILELANG_DTYPE


@dataclass(frozen=True)
class Config:
    block_M: int  # tokens a thread block
    threads: int


# sm_90a: 16 tokens x 64 pairs over 128 threads, 8 pairs a thread.
# gfx942: the same tile over 128 threads = 2 wave64s.
DEFAULTS = {"sm_90a": Config(block_M=16, threads=128), "gfx942": Config(block_M=16, threads=128)}


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    return target.pick(DEFAULTS)


def rope(M: int, H: int, D: int, dtype: str, cfg: Config, target: Target):
    """Return the ``T.prim_func`` for one shape and configuration; edge tiles are guarded."""
    T = compat.tilelang_language(target)
    io_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM, half = cfg.block_M, D // 2

    @T.prim_func
    def rope_kernel(X: T.Tensor((M, H * D), io_dtype), C: T.Tensor((M, half), io_dtype),
                    S: T.Tensor((M, half), io_dtype), Y: T.Tensor((M, H * D), io_dtype)):
        with T.Kernel(H, T.ceildiv(M, bM), threads=cfg.threads) as (bx, by):
            x1 = T.alloc_fragment((bM, half), io_dtype)
            x2 = T.alloc_fragment((bM, half), io_dtype)
            c = T.alloc_fragment((bM, half), io_dtype)
            s = T.alloc_fragment((bM, half), io_dtype)
            y1 = T.alloc_fragment((bM, half), io_dtype)
            y2 = T.alloc_fragment((bM, half), io_dtype)
            T.copy(X[by * bM, bx * D], x1)
            T.copy(X[by * bM, bx * D + half], x2)
            T.copy(C[by * bM, 0], c)
            T.copy(S[by * bM, 0], s)
            for i, j in T.Parallel(bM, half):
                y1[i, j] = T.cast(T.cast(x1[i, j], accum_dtype) * T.cast(c[i, j], accum_dtype)
                                  - T.cast(x2[i, j], accum_dtype)
                                  * T.cast(s[i, j], accum_dtype), io_dtype)
                y2[i, j] = T.cast(T.cast(x2[i, j], accum_dtype) * T.cast(c[i, j], accum_dtype)
                                  + T.cast(x1[i, j], accum_dtype)
                                  * T.cast(s[i, j], accum_dtype), io_dtype)
            T.copy(y1, Y[by * bM, bx * D])
            T.copy(y2, Y[by * bM, bx * D + half])

    return rope_kernel


def prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    d = case.dims
    return rope(d["M"], d["H"], d["D"], dtype, cfg, target)


build, aot = compat.tilelang_entry_points(prim_func, default_config)
