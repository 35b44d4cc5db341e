"""TileLang LayerNorm in the style of TileLang's examples/norm/layernorm.py: a block of rows per
program, the rows in a register fragment, mean and variance by T.reduce_sum."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from kernels import compat
from kernels.op import DTYPE_BYTES, Build, Case, Unsupported
from kernels.targets import Target

from .spec import EPS

TL_DTYPE = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


@dataclass(frozen=True)
class Config:
    block_M: int  # rows per program
    threads: int


@dataclass(frozen=True)
class Tuning:
    max_cols: int  # widest row one program holds in registers
    elems_per_program: int  # narrow power-of-two rows are grouped until a program holds this many
    threads: int  # the most threads a program gets
    min_threads: int


# sm_90a: up to 256 threads (8 warps), 16 values each on a 4096-wide row.
# gfx942: up to 256 threads = 4 wave64s, the block size of TileLang's AMD examples; never
# fewer than one wave64.
TUNING = {
    "sm_90a": Tuning(max_cols=16384, elems_per_program=4096, threads=256, min_threads=64),
    "gfx942": Tuning(max_cols=16384, elems_per_program=4096, threads=256, min_threads=64),
}


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    """Rows spread over all threads; several rows a program only for power-of-two widths.

    TileLang 0.1.15 infers a row-spread fragment layout only when every thread holds the
    same whole number of each row's columns; otherwise it gives each thread a whole row
    (correct, but a register file per thread) or fails. So for other widths one row per
    program, and the thread count that divides N with the widest vectors (16-byte loads).
    """
    tuning = TUNING[target.name]
    n_cols = case.dims["N"]
    if n_cols > tuning.max_cols:
        raise Unsupported(f"layernorm/{case.name}: N={n_cols} exceeds the one-block row limit "
                          f"{tuning.max_cols} of tilelang_layernorm on {target.name}")
    if n_cols & (n_cols - 1) == 0 and n_cols >= tuning.threads:
        return Config(block_M=max(1, tuning.elems_per_program // n_cols), threads=tuning.threads)
    vector = 16 // DTYPE_BYTES[dtype]
    fits = [t for t in (tuning.threads, tuning.threads // 2, tuning.threads // 4)
            if t >= tuning.min_threads and n_cols % t == 0]
    if not fits:
        raise Unsupported(f"layernorm/{case.name}: N={n_cols} is not a multiple of "
                          f"{tuning.min_threads} threads: tilelang_layernorm has no row layout")
    threads = max(fits, key=lambda t: (math.gcd(n_cols // t, vector), t))
    return Config(block_M=1, threads=threads)


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


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target, dtype), **overrides)
    kernel = compat.tilelang_compile(prim_func(case, dtype, cfg, target))
    return Build(fn=kernel, config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    """gfx942: HIP source only (no hipcc here); sm_90a: a full nvcc compile to a cubin."""
    cfg = replace(default_config(case, target, dtype), **overrides)
    func = prim_func(case, dtype, cfg, target)
    return compat.tilelang_artifacts(func, target) | {"config": asdict(cfg)}
