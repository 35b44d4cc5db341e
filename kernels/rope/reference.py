"""PyTorch reference and inputs for RoPE."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype

from .spec import check_dims


def make_inputs(case: Case, dtype: str, device: str,
                seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [M, H*D], and cos, sin [M, D/2] of angles position * 10000^(-2i/D)."""
    check_dims(case)
    d = case.dims
    gen = seeded(device, seed)
    x = torch.randn(d["M"], d["H"] * d["D"], generator=gen, device=device)
    half = d["D"] // 2
    inv_freq = 10000.0 ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.arange(d["M"], device=device, dtype=torch.float32)[:, None] * inv_freq
    t = torch_dtype(dtype)
    return x.to(t), angles.cos().to(t), angles.sin().to(t)


def reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return _rope(x.double(), cos.double(), sin.double())


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = cos.shape[-1]
    heads = x.view(x.shape[0], -1, 2 * half)
    x1, x2 = heads[..., :half], heads[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).view_as(x)


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """Eager torch as Llama's HF code runs it: slice, multiply, concatenate (several kernels)."""
    return Build(fn=_rope, config={"library": "torch eager (cat of rotated halves)"})
