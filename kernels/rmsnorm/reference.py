"""PyTorch reference and inputs for RMSNorm."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype

from .spec import EPS


def make_inputs(case: Case, dtype: str, device: str,
                seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    d = case.dims
    gen = seeded(device, seed)
    x = torch.randn(d["M"], d["N"], generator=gen, device=device).to(torch_dtype(dtype))
    # Weights near 1, as trained norm weights are, but not exactly 1 so w is really applied.
    w = (1.0 + 0.1 * torch.randn(d["N"], generator=gen, device=device)).to(torch_dtype(dtype))
    return x, w


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """torch.nn.functional.rms_norm (torch >= 2.4): the baseline."""
    shape = (case.dims["N"],)

    def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, shape, w, EPS)

    return Build(fn=rms_norm, config={"library": "torch.nn.functional.rms_norm"})
