"""Triton SwiGLU in the style of Triton's vector-add tutorial: a 1-D block of the flattened
tensors per program, silu in fp32."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import triton
import triton.language as tl

from kperf.ops import Build, Case, Target, compat


@dataclass(frozen=True)
class Config:
    BLOCK: int  # elements per program
    num_warps: int  # warps of 32 lanes on NVIDIA, waves of 64 lanes on gfx942


# sm_90a: 4096 elements over 8 warps = 16 a lane, two 16-byte loads of each input.
# gfx942: 4096 over 8 wave64s = 8 a lane, one 16-byte (dwordx4) load of each input.
DEFAULTS = {
    "sm_90a": Config(BLOCK=4096, num_warps=8),
    "gfx942": Config(BLOCK=4096, num_warps=8),
}


def default_config(case: Case, target: Target) -> Config:
    return target.pick(DEFAULTS)


@triton.jit
def swiglu_kernel(x_ptr, g_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK  # 64-bit: the largest case has 2**28 elements
    offsets = start + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-x)) * g
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def swiglu(x, g, cfg: Config):
    import torch

    if x.shape != g.shape or not (x.is_contiguous() and g.is_contiguous()):
        raise ValueError(f"triton_swiglu: x {tuple(x.shape)} and g {tuple(g.shape)} must be "
                         "contiguous tensors of one shape")
    y = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, cfg.BLOCK),)
    swiglu_kernel[grid](x, g, y, n_elements, BLOCK=cfg.BLOCK, num_warps=cfg.num_warps)
    return y


def build(case: Case, dtype: str, target: Target, **overrides: Any) -> Build:
    cfg = replace(default_config(case, target), **overrides)
    return Build(fn=lambda x, g: swiglu(x, g, cfg), config=asdict(cfg))


def aot(case: Case, dtype: str, target: Target, **overrides: Any) -> dict[str, Any]:
    cfg = replace(default_config(case, target), **overrides)
    t = compat.triton_dtype(dtype)
    signature = {"x_ptr": f"*{t}", "g_ptr": f"*{t}", "y_ptr": f"*{t}", "n_elements": "i32",
                 "BLOCK": "constexpr"}
    n_elements = case.dims["M"] * case.dims["N"]
    # What the JIT sees at launch: 16-byte aligned tensors, the size marked if divisible by 16.
    aligned = ("x_ptr", "g_ptr", "y_ptr", *(("n_elements",) if n_elements % 16 == 0 else ()))
    compiled = compat.triton_aot_aligned(swiglu_kernel, signature, {"BLOCK": cfg.BLOCK}, target,
                                         {"num_warps": cfg.num_warps}, aligned)
    return compat.triton_artifacts(compiled) | {"config": asdict(cfg),
                                                "threads": cfg.num_warps * target.warp_size}
