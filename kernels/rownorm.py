"""How the TileLang row-norm kernels (RMSNorm, LayerNorm) lay a row over a program's threads."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernels.op import DTYPE_BYTES, Case, Unsupported
from kernels.targets import Target


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


def row_config(kernel: str, case: Case, target: Target, dtype: str) -> Config:
    """Rows spread over all threads; several rows a program only for power-of-two widths.

    TileLang 0.1.15 infers a row-spread fragment layout only when every thread holds the
    same whole number of each row's columns; otherwise it gives each thread a whole row
    (correct, but a register file per thread) or fails. So for other widths one row per
    program, and the thread count that divides N with the widest vectors (16-byte loads).
    ``kernel`` ("tilelang_rmsnorm") names the kernel in errors.
    """
    tuning = TUNING[target.name]
    n_cols = case.dims["N"]
    what = f"{kernel.removeprefix('tilelang_')}/{case.name}"
    if n_cols > tuning.max_cols:
        raise Unsupported(f"{what}: N={n_cols} exceeds the one-block row limit "
                          f"{tuning.max_cols} of {kernel} on {target.name}")
    if n_cols & (n_cols - 1) == 0 and n_cols >= tuning.threads:
        return Config(block_M=max(1, tuning.elems_per_program // n_cols), threads=tuning.threads)
    vector = 16 // DTYPE_BYTES[dtype]
    fits = [t for t in (tuning.threads, tuning.threads // 2, tuning.threads // 4)
            if t >= tuning.min_threads and n_cols % t == 0]
    if not fits:
        raise Unsupported(f"{what}: N={n_cols} is not a multiple of "
                          f"{tuning.min_threads} threads: {kernel} has no row layout")
    threads = max(fits, key=lambda t: (math.gcd(n_cols // t, vector), t))
    return Config(block_M=1, threads=threads)
