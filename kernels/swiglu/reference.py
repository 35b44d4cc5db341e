"""PyTorch reference and inputs for SwiGLU."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype


def make_inputs(case: Case, dtype: str, device: str,
                seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    d = case.dims
    gen = seeded(device, seed)
    # Wide enough that both the linear (x > 0) and the saturated (x << 0) ends of silu occur.
    x = 3.0 * torch.randn(d["M"], d["N"], generator=gen, device=device)
    g = torch.randn(d["M"], d["N"], generator=gen, device=device)
    return x.to(torch_dtype(dtype)), g.to(torch_dtype(dtype))


def reference(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(x.float()) * g.float()


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """F.silu(x) * g: what eager Llama MLPs run (two kernels, the baseline to beat)."""

    def swiglu(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x) * g

    return Build(fn=swiglu, config={"library": "torch.nn.functional.silu(x) * g"})
