"""Triton row softmax in the style of Triton's fused-softmax tutorial.

Rows that fit in registers (BLOCK_N = next power of two of N) are read once: max, exp, sum
and scale happen on the loaded block, a block of rows per program. Wider rows (the 128256
vocabulary) loop over the row twice: an online pass keeps a running max and rescaled sum
per lane, then a second pass writes exp(x - max) / sum. The second pass walks the row
backwards, so it starts on the chunks the first pass read last, the ones most likely still
in L2; with ``programs_per_sm`` set, a fixed grid of programs strides over the rows, which
bounds the rows in flight (and so the L2 footprint between the passes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kernels.rownorm import triton_num_warps, triton_row_config
from kperf.ops import Build, Case, Target, compat


@dataclass(frozen=True)
class Config:
    BLOCK_M: int  # rows per program (1 when looped)
    BLOCK_N: int  # the whole row (one pass), or the chunk the loops step by (looped)
    num_warps: int  # warps of 32 lanes on NVIDIA, waves of 64 lanes on gfx942
    looped: bool
    num_stages: int = 1  # software pipelining of the looped kernel's loads
    programs_per_sm: int = 0  # looped: a grid of this many programs per SM; 0: one per row


@dataclass(frozen=True)
class Tuning:
    max_block_n: int  # widest row held in registers in one piece; wider rows loop
    loop_block_n: int  # chunk of a looped row
    loop_stages: int


# Rows that fit take the row layout of the norms (kernels/rownorm.py); looped rows step by
# 4096, 8 warps (sm_90a) or 8 wave64s (gfx942) a program. Their loads are not pipelined:
# loop_stages 2 and 1 give the same code object on both targets (2026-12-06).
TUNING = {
    "sm_90a": Tuning(max_block_n=8192, loop_block_n=4096, loop_stages=2),
    "gfx942": Tuning(max_block_n=8192, loop_block_n=4096, loop_stages=2),
}


def default_config(case: Case, target: Target) -> Config:
    tuning = target.pick(TUNING)
    if triton.next_power_of_2(case.dims["N"]) > tuning.max_block_n:
        return Config(BLOCK_M=1, BLOCK_N=tuning.loop_block_n, looped=True,
                      num_warps=triton_num_warps(tuning.loop_block_n, target),
                      num_stages=tuning.loop_stages)
    rows = triton_row_config("triton_softmax", case, target)
    return Config(BLOCK_M=rows.BLOCK_M, BLOCK_N=rows.BLOCK_N, num_warps=rows.num_warps,
                  looped=False)


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = (cols < n_cols)[None, :]
    mask = (rows < n_rows)[:, None] & col_ok
    rows = rows.to(tl.int64)  # rows * stride passes 2**31 elements on the largest cases
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    # padding columns must not win the max; padding rows stay finite (they are never stored)
    x = tl.where(col_ok, x.to(tl.float32), -float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def softmax_looped_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                          BLOCK_N: tl.constexpr):
    n_chunks = tl.cdiv(n_cols, BLOCK_N)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        # Per-lane running max and sum: no cross-lane reduction inside the loop. The max
        # starts finite so a lane that only sees padding (-inf) rescales by exp(0), not nan.
        run_max = tl.full([BLOCK_N], -1e30, tl.float32)
        run_sum = tl.zeros([BLOCK_N], tl.float32)
        for chunk in range(0, n_chunks):
            cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            # one exp per element: exp(-|x - max|) rescales the old sum or is the new term
            diff = x - run_max
            e = tl.exp(-tl.abs(diff))
            run_sum = tl.where(diff > 0, run_sum * e + 1.0, run_sum + e)
            run_max = tl.maximum(run_max, x)
        row_max = tl.max(run_max, axis=0)
        inv_sum = 1.0 / tl.sum(run_sum * tl.exp(run_max - row_max), axis=0)
        for chunk in range(0, n_chunks):
            cols = (n_chunks - 1 - chunk) * BLOCK_N + tl.arange(0, BLOCK_N)
            col_ok = cols < n_cols
            x = tl.load(x_row + cols, mask=col_ok, other=0.0).to(tl.float32)
            y = tl.exp(x - row_max) * inv_sum
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=col_ok)


def looped_programs(n_rows: int, cfg: Config, device) -> int:
    """Grid of the looped kernel: one program per row, or ``programs_per_sm`` per SM."""
    if cfg.programs_per_sm <= 0:
        return n_rows
    import torch

    # the interpreter's tensors are on the CPU: one "SM", so the grid still strides
    sms = (torch.cuda.get_device_properties(device).multi_processor_count
           if device.type != "cpu" else 1)
    return max(1, min(n_rows, cfg.programs_per_sm * sms))


def softmax(x, cfg: Config):
    import torch

    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    if cfg.looped:
        grid = (looped_programs(n_rows, cfg, x.device),)
        softmax_looped_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                    BLOCK_N=cfg.BLOCK_N, **opts)
    else:
        grid = (triton.cdiv(n_rows, cfg.BLOCK_M),)
        softmax_rows_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                  BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, **opts)
    return y


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda x: softmax(x, cfg), config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    cfg = replace(default_config(case, target), **overrides)
    t = compat.triton_dtype(dtype)
    sizes = {"n_rows": case.dims["M"], "n_cols": case.dims["N"], "stride_x": case.dims["N"],
             "stride_y": case.dims["N"]}
    if cfg.looped:
        fn, constexprs = softmax_looped_kernel, {"BLOCK_N": cfg.BLOCK_N}
    else:
        fn, constexprs = softmax_rows_kernel, {"BLOCK_M": cfg.BLOCK_M, "BLOCK_N": cfg.BLOCK_N}
    signature = {"x_ptr": f"*{t}", "y_ptr": f"*{t}", **dict.fromkeys(sizes, "i32"),
                 **dict.fromkeys(constexprs, "constexpr")}
    # What the JIT sees at launch: 16-byte aligned tensors, and sizes divisible by 16 marked.
    aligned = ("x_ptr", "y_ptr", *(name for name, value in sizes.items() if value % 16 == 0))
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    compiled = compat.triton_aot_aligned(fn, signature, constexprs, target, options, aligned)
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg),
                                                "threads": cfg.num_warps * target.warp_size}
