"""PyTorch reference and inputs for GEMM."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, seeded, torch_dtype


def make_inputs(case: Case, dtype: str, device: str,
                seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    d = case.dims
    gen = seeded(device, seed)
    # Scaled so that each output is O(1) whatever K is: keeps fp16 far from overflow.
    scale = d["K"] ** -0.25
    a = (torch.randn(d["M"], d["K"], generator=gen, device=device) * scale).to(torch_dtype(dtype))
    b = (torch.randn(d["K"], d["N"], generator=gen, device=device) * scale).to(torch_dtype(dtype))
    return a, b


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 product of the (exactly representable) 16-bit inputs."""
    return a.float() @ b.float()


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """The vendor library (cuBLAS / hipBLASLt) through torch.matmul: the baseline."""
    return Build(fn=torch.matmul, config={"library": "torch.matmul"})
