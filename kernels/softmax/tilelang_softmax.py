"""TileLang row softmax in the style of TileLang's examples/online_softmax.

Rows that fit one block: a block of rows in a register fragment, T.reduce_max then
T.reduce_sum, one read and one write. Wider rows (the 128256 vocabulary): one row per
program, looped in chunks; the first pass keeps a running max and rescaled sum per fragment
element (reduced across threads once, after the loop), the second writes the result,
walking the row backwards so it starts on the chunks most likely still in L2. With
``programs_per_sm`` set, a fixed grid strides over the rows (bounding the rows in flight between
the passes), and ``stages`` > 0 stages the chunks through shared memory in a pipeline.
exp is exp2 of x * log2(e), as the example does.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels.rownorm import tilelang_row_config
from kperf.ops import Case, Target, compat

TL_DTYPE = compat.TILELANG_DTYPE
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Config:
    block_M: int  # rows per program (1 when looped)
    threads: int
    looped: bool
    block_N: int = 0  # chunk of a looped row (0: the whole row in one block)
    programs_per_sm: int = 0  # looped: a grid of this many programs per SM; 0: one per row
    stages: int = 0  # looped: chunks staged through shared memory, pipelined; 0: direct loads


@dataclass(frozen=True)
class Tuning:
    max_cols: int  # widest row held in one block; wider rows loop
    threads: int  # threads of a looped program
    loop_block_n: int  # chunk of a looped row


# sm_90a: 256 threads (8 warps); a looped row steps by 4096 = 16 values a thread.
# gfx942: 256 threads = 4 wave64s (TileLang's AMD examples), same 4096 chunk.
TUNING = {
    "sm_90a": Tuning(max_cols=8192, threads=256, loop_block_n=4096),
    "gfx942": Tuning(max_cols=8192, threads=256, loop_block_n=4096),
}


def default_config(case: Case, target: Target, dtype: str = "fp16") -> Config:
    """Looped beyond ``max_cols``; else the row layout of the norms (kernels/rownorm.py)."""
    tuning = target.pick(TUNING)
    if case.dims["N"] > tuning.max_cols:
        return Config(block_M=1, threads=tuning.threads, looped=True,
                      block_N=tuning.loop_block_n)
    rows = tilelang_row_config("tilelang_softmax", case, target, dtype)
    return Config(block_M=rows.block_M, threads=rows.threads, looped=False)


def softmax_rows(M: int, N: int, dtype: str, cfg: Config, target: Target):
    """One pass: ``block_M`` whole rows a program."""
    T = compat.tilelang_language(target)
    io_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bM = cfg.block_M

    @T.prim_func
    def softmax(X: T.Tensor((M, N), io_dtype), Y: T.Tensor((M, N), io_dtype)):
        with T.Kernel(T.ceildiv(M, bM), threads=cfg.threads) as bx:
            x = T.alloc_fragment((bM, N), io_dtype)
            scaled = T.alloc_fragment((bM, N), accum_dtype)
            row_max = T.alloc_fragment((bM,), accum_dtype)
            row_sum = T.alloc_fragment((bM,), accum_dtype)
            y = T.alloc_fragment((bM, N), io_dtype)
            T.copy(X[bx * bM, 0], x)
            for i, j in T.Parallel(bM, N):
                scaled[i, j] = T.cast(x[i, j], accum_dtype) * LOG2E
            T.reduce_max(scaled, row_max, dim=1)
            for i, j in T.Parallel(bM, N):
                scaled[i, j] = T.exp2(scaled[i, j] - row_max[i])
            T.reduce_sum(scaled, row_sum, dim=1)
            for i, j in T.Parallel(bM, N):
                y[i, j] = T.cast(scaled[i, j] / row_sum[i], io_dtype)
            T.copy(y, Y[bx * bM, 0])

    return softmax


def looped_programs(M: int, cfg: Config, target: Target) -> int:
    """Grid of the looped kernel (a compile-time constant in TileLang): sized for the
    target's SM / CU count, since a TileLang kernel is compiled for one target."""
    if cfg.programs_per_sm <= 0:
        return M
    return max(1, min(M, cfg.programs_per_sm * target.sm_count))


def softmax_looped(M: int, N: int, dtype: str, cfg: Config, target: Target):
    """Two passes over a row in ``block_N`` chunks; the last chunk is ragged."""
    T = compat.tilelang_language(target)
    io_dtype, accum_dtype = TL_DTYPE[dtype], "float32"
    bN = cfg.block_N
    chunks = (N + bN - 1) // bN
    programs = looped_programs(M, cfg, target)
    rows_per_program = (M + programs - 1) // programs

    staged = cfg.stages > 0  # a Python bool: the parser keeps one branch of each `if staged`

    @T.prim_func
    def softmax(X: T.Tensor((M, N), io_dtype), Y: T.Tensor((M, N), io_dtype)):
        with T.Kernel(programs, threads=cfg.threads) as bx:
            # 2-D: what TMA and multi-buffering take; one per pipelined loop, each multi-buffered
            x_shared = T.alloc_shared((1, bN), io_dtype)
            x_shared2 = T.alloc_shared((1, bN), io_dtype)
            x = T.alloc_fragment((bN,), io_dtype)
            scaled = T.alloc_fragment((bN,), accum_dtype)
            run_max = T.alloc_fragment((bN,), accum_dtype)
            run_sum = T.alloc_fragment((bN,), accum_dtype)
            row_max = T.alloc_fragment((1,), accum_dtype)
            row_sum = T.alloc_fragment((1,), accum_dtype)
            y = T.alloc_fragment((bN,), io_dtype)
            for r in T.serial(rows_per_program):
                row = r * programs + bx
                if row < M:
                    # finite start: an element that only sees padding rescales by exp2(0)
                    T.fill(run_max, -1e30)
                    T.clear(run_sum)
                    for k in T.Pipelined(chunks, num_stages=cfg.stages):  # 0: not pipelined
                        if staged:
                            T.copy(X[row, k * bN], x_shared)
                            for j in T.Parallel(bN):
                                x[j] = x_shared[0, j]
                        else:
                            T.copy(X[row, k * bN], x)
                        for j in T.Parallel(bN):
                            scaled[j] = T.if_then_else(k * bN + j < N,
                                                       T.cast(x[j], accum_dtype) * LOG2E,
                                                       -T.infinity(accum_dtype))
                        # one exp per element: exp2(-|x - max|) rescales or is the new term
                        for j in T.Parallel(bN):
                            run_sum[j] = T.if_then_else(
                                scaled[j] > run_max[j],
                                run_sum[j] * T.exp2(-T.abs(scaled[j] - run_max[j])) + 1.0,
                                run_sum[j] + T.exp2(-T.abs(scaled[j] - run_max[j])))
                            run_max[j] = T.max(run_max[j], scaled[j])
                    T.reduce_max(run_max, row_max, dim=0)
                    for j in T.Parallel(bN):
                        run_sum[j] = run_sum[j] * T.exp2(run_max[j] - row_max[0])
                    T.reduce_sum(run_sum, row_sum, dim=0)
                    for k in T.Pipelined(chunks, num_stages=cfg.stages):
                        if staged:
                            T.copy(X[row, (chunks - 1 - k) * bN], x_shared2)
                            for j in T.Parallel(bN):
                                x[j] = x_shared2[0, j]
                        else:
                            T.copy(X[row, (chunks - 1 - k) * bN], x)
                        for j in T.Parallel(bN):
                            y[j] = T.cast(T.exp2(T.cast(x[j], accum_dtype) * LOG2E - row_max[0])
                                          / row_sum[0], io_dtype)
                        T.copy(y, Y[row, (chunks - 1 - k) * bN])

    return softmax


def prim_func(case: Case, dtype: str, cfg: Config, target: Target):
    factory = softmax_looped if cfg.looped else softmax_rows
    return factory(case.dims["M"], case.dims["N"], dtype, cfg, target)


build, aot = compat.tilelang_entry_points(prim_func, default_config)
