"""Triton LayerNorm in the style of Triton's layer-norm tutorial (forward): a block of rows per
program, the whole row in registers (BLOCK_N = next power of two of N), fp32 mean and variance."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import triton
import triton.language as tl

from kernels.rownorm import TritonConfig, triton_row_config
from kperf.ops import Build, Case, Target, compat

from .spec import EPS

Config = TritonConfig


def default_config(case: Case, target: Target) -> Config:
    return triton_row_config("triton_layernorm", case, target)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    rows = rows.to(tl.int64)  # rows * stride passes 2**31 elements on the largest cases
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centred = tl.where(mask, x - mean[:, None], 0.0)  # padding must not enter the variance
    rstd = tl.rsqrt(tl.sum(centred * centred, axis=1) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


def layernorm(x, w, b, cfg: Config):
    import torch

    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    grid = (triton.cdiv(n_rows, cfg.BLOCK_M),)
    layernorm_kernel[grid](x, w, b, y, n_rows, n_cols, x.stride(0), y.stride(0), EPS,
                           BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, num_warps=cfg.num_warps)
    return y


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda x, w, b: layernorm(x, w, b, cfg), config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    cfg = replace(default_config(case, target), **overrides)
    t = compat.triton_dtype(dtype)
    signature = {"x_ptr": f"*{t}", "w_ptr": f"*{t}", "b_ptr": f"*{t}", "y_ptr": f"*{t}",
                 "n_rows": "i32", "n_cols": "i32", "stride_x": "i32", "stride_y": "i32",
                 "eps": "fp32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    # What the JIT sees at launch: 16-byte aligned tensors, and sizes divisible by 16 marked.
    sizes = {"n_rows": case.dims["M"], "n_cols": case.dims["N"], "stride_x": case.dims["N"],
             "stride_y": case.dims["N"]}
    aligned = ("x_ptr", "w_ptr", "b_ptr", "y_ptr",
               *(name for name, value in sizes.items() if value % 16 == 0))
    compiled = compat.triton_aot_aligned(layernorm_kernel, signature,
                                         {"BLOCK_M": cfg.BLOCK_M, "BLOCK_N": cfg.BLOCK_N},
                                         target, {"num_warps": cfg.num_warps}, aligned)
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg),
                                                "threads": cfg.num_warps * target.warp_size}
