"""PyTorch reference and inputs for LayerNorm."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype

from .spec import EPS


def make_inputs(case: Case, dtype: str, device: str,
                seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    d = case.dims
    gen = seeded(device, seed)
    # A non-zero mean per row, as hidden states have, so centring is really exercised.
    x = (torch.randn(d["M"], d["N"], generator=gen, device=device)
         + torch.randn(d["M"], 1, generator=gen, device=device))
    w = 1.0 + 0.1 * torch.randn(d["N"], generator=gen, device=device)
    b = 0.1 * torch.randn(d["N"], generator=gen, device=device)
    return tuple(t.to(torch_dtype(dtype)) for t in (x, w, b))


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = (xf - mean).pow(2).mean(-1, keepdim=True)
    return (xf - mean) * torch.rsqrt(var + EPS) * w.float() + b.float()


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """torch.nn.functional.layer_norm: the baseline."""
    shape = (case.dims["N"],)

    def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, shape, w, b, EPS)

    return Build(fn=layer_norm, config={"library": "torch.nn.functional.layer_norm"})
