"""How the row-norm kernels (RMSNorm, LayerNorm) lay a row over a program's threads, for
TileLang and for Triton: one policy for both ops, per compiler."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kperf.ops import DTYPE_BYTES, Case, Target, Unsupported


@dataclass(frozen=True)
class TileLangConfig:
    block_M: int  # rows per program
    threads: int


@dataclass(frozen=True)
class TileLangTuning:
    max_cols: int  # widest row one program holds in registers
    elems_per_program: int  # narrow power-of-two rows are grouped until a program holds this many
    threads: int  # the most threads a program gets
    min_threads: int


# sm_90a: up to 256 threads (8 warps), 16 values each on a 4096-wide row.
# gfx942: up to 256 threads = 4 wave64s, the block size of TileLang's AMD examples; never
# fewer than one wave64.
TILELANG_TUNING = {
    "sm_90a": TileLangTuning(max_cols=16384, elems_per_program=4096, threads=256,
                             min_threads=64),
    "gfx942": TileLangTuning(max_cols=16384, elems_per_program=4096, threads=256,
                             min_threads=64),
}


def tilelang_row_config(kernel: str, case: Case, target: Target,
                        dtype: str) -> TileLangConfig:
    """Rows spread over all threads; several rows a program only for power-of-two widths.

    TileLang 0.1.15 infers a row-spread fragment layout only when every thread holds the
    same whole number of each row's columns; otherwise it gives each thread a whole row
    (correct, but a register file per thread) or fails. So for other widths one row per
    program, and the thread count that divides N with the widest vectors (16-byte loads).
    ``kernel`` ("tilelang_rmsnorm") names the kernel in errors.
    """
    tuning = target.pick(TILELANG_TUNING)
    n_cols = case.dims["N"]
    what = f"{kernel.removeprefix('tilelang_')}/{case.name}"
    if n_cols > tuning.max_cols:
        raise Unsupported(f"{what}: N={n_cols} exceeds the one-block row limit "
                          f"{tuning.max_cols} of {kernel} on {target.name}")
    if n_cols & (n_cols - 1) == 0 and n_cols >= tuning.threads:
        return TileLangConfig(block_M=max(1, tuning.elems_per_program // n_cols),
                              threads=tuning.threads)
    vector = 16 // DTYPE_BYTES[dtype]
    fits = [t for t in (tuning.threads, tuning.threads // 2, tuning.threads // 4)
            if t >= tuning.min_threads and n_cols % t == 0]
    if not fits:
        raise Unsupported(f"{what}: N={n_cols} is not a multiple of "
                          f"{tuning.min_threads} threads: {kernel} has no row layout")
    threads = max(fits, key=lambda t: (math.gcd(n_cols // t, vector), t))
    return TileLangConfig(block_M=1, threads=threads)


# ---------------------------------------------------------------- Triton row norms


@dataclass(frozen=True)
class TritonConfig:
    BLOCK_M: int  # rows per program
    BLOCK_N: int  # columns held per row: next power of two of N
    num_warps: int  # warps of 32 lanes on NVIDIA, waves of 64 lanes on gfx942


@dataclass(frozen=True)
class TritonTuning:
    max_block_n: int  # widest row held in registers in one piece
    elems_per_program: int  # narrow rows are grouped until a program holds this many
    elems_per_lane: int  # num_warps = block elements / (lanes per warp * this)
    max_warps: int


# sm_90a: 16 fp32 values per lane, up to 8 warps (256 threads) a program.
# gfx942: wave64 doubles the lanes per warp, so 8 values per lane gives the same 8 waves
# (512 lanes) for a 4096-wide row: each lane still issues 16-byte loads of fp16.
TRITON_TUNING = {
    "sm_90a": TritonTuning(max_block_n=16384, elems_per_program=4096, elems_per_lane=16,
                           max_warps=8),
    "gfx942": TritonTuning(max_block_n=16384, elems_per_program=4096, elems_per_lane=8,
                           max_warps=8),
}


def triton_row_config(kernel: str, case: Case, target: Target) -> TritonConfig:
    """One power-of-two row block per row; narrow rows grouped; warps from the block size.
    ``kernel`` ("triton_rmsnorm") names the kernel in errors."""
    tuning = target.pick(TRITON_TUNING)
    n_cols = case.dims["N"]
    block_n = 1 << max(n_cols - 1, 0).bit_length()  # next power of two
    if block_n > tuning.max_block_n:
        raise Unsupported(f"{kernel.removeprefix('triton_')}/{case.name}: N={n_cols} exceeds "
                          f"the one-block row limit {tuning.max_block_n} of {kernel} on "
                          f"{target.name}")
    block_m = max(1, tuning.elems_per_program // block_n)
    return TritonConfig(BLOCK_M=block_m, BLOCK_N=block_n,
                        num_warps=triton_num_warps(block_m * block_n, target))


def triton_num_warps(elems: int, target: Target) -> int:
    """Warps for a block of ``elems`` values: ``elems_per_lane`` each, up to ``max_warps``."""
    tuning = target.pick(TRITON_TUNING)
    lanes = elems // tuning.elems_per_lane
    return min(max(lanes // target.warp_size, 1), tuning.max_warps)
