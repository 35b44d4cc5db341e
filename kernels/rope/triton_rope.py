"""Triton RoPE: one program a token and a block of heads; each head's halves loaded as
two vectors of D/2, rotated in fp32 by the token's cos and sin (loaded once a program)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kperf.ops import Build, Case, Target, compat


@dataclass(frozen=True)
class Config:
    BLOCK_H: int  # heads a program
    num_warps: int


# 4 heads of 128 a program: 512 values of x over 4 warps (sm_90a) / 4 wave64s (gfx942).
DEFAULTS = {"sm_90a": Config(BLOCK_H=4, num_warps=4), "gfx942": Config(BLOCK_H=4, num_warps=4)}


def default_config(case: Case, target: Target) -> Config:
    return target.pick(DEFAULTS)


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, H, row_stride, HALF: tl.constexpr,
                BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = tl.arange(0, HALF)
    c = tl.load(cos_ptr + row * HALF + cols).to(tl.float32)
    s = tl.load(sin_ptr + row * HALF + cols).to(tl.float32)
    offs = row * row_stride + heads[:, None] * (2 * HALF) + cols[None, :]
    mask = (heads < H)[:, None]
    x1 = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offs + HALF, mask=mask, other=0.0).to(tl.float32)
    out = y_ptr.dtype.element_ty
    tl.store(y_ptr + offs, (x1 * c[None, :] - x2 * s[None, :]).to(out), mask=mask)
    tl.store(y_ptr + offs + HALF, (x2 * c[None, :] + x1 * s[None, :]).to(out), mask=mask)


def rope(x, cos, sin, cfg: Config):
    import torch

    half = cos.shape[-1]
    heads = x.shape[1] // (2 * half)
    y = torch.empty_like(x)
    grid = (x.shape[0], triton.cdiv(heads, cfg.BLOCK_H))
    rope_kernel[grid](x, cos, sin, y, heads, x.stride(0), HALF=half, BLOCK_H=cfg.BLOCK_H,
                      num_warps=cfg.num_warps)
    return y


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda x, cos, sin: rope(x, cos, sin, cfg), config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    cfg = replace(default_config(case, target), **overrides)
    t = compat.triton_dtype(dtype)
    signature = {"x_ptr": f"*{t}", "cos_ptr": f"*{t}", "sin_ptr": f"*{t}", "y_ptr": f"*{t}",
                 "H": "i32", "row_stride": "i32", "HALF": "constexpr", "BLOCK_H": "constexpr"}
    d = case.dims
    # What the JIT sees at launch: 16-byte aligned tensors, the sizes marked if divisible by 16.
    aligned = ("x_ptr", "cos_ptr", "sin_ptr", "y_ptr",
               *(name for name, v in (("H", d["H"]), ("row_stride", d["H"] * d["D"]))
                 if v % 16 == 0))
    compiled = compat.triton_aot_aligned(rope_kernel, signature,
                                         {"HALF": d["D"] // 2, "BLOCK_H": cfg.BLOCK_H}, target,
                                         {"num_warps": cfg.num_warps}, aligned)
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg),
                                                "threads": cfg.num_warps * target.warp_size}
