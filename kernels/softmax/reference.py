"""PyTorch reference and inputs for row softmax."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype


def make_inputs(case: Case, dtype: str, device: str, seed: int) -> tuple[torch.Tensor]:
    d = case.dims
    gen = seeded(device, seed)
    # Spread like logits and scaled attention scores: a few entries stand out of each row.
    x = 2.0 * torch.randn(d["M"], d["N"], generator=gen, device=device)
    return (x.to(torch_dtype(dtype)),)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1)


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """torch.softmax over the last dimension (fp32 inside, output in the input dtype)."""

    def softmax(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)

    return Build(fn=softmax, config={"library": "torch.softmax"})
