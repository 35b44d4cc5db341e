"""Quantized inputs, the fp32 reference, and the torch baseline for the FP8 GEMM."""

from __future__ import annotations

from collections.abc import Callable

import torch

from kperf.ops import Build, Case, Target, seeded

from .spec import Fp8Format, check_dtype, fp8_format_for_device

# torch._scaled_mm (cuBLASLt / hipBLASLt) wants every dimension a multiple of 16.
SCALED_MM_ALIGN = 16


def quantize_rows(x: torch.Tensor, fmt: Fp8Format) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row symmetric quantization: (x / scale) in fp8 and scale = amax / fmt.max_value.

    Returns the fp8 tensor and the [rows, 1] fp32 scales; q.float() * scale approximates x.
    """
    if x.dim() != 2 or x.dtype != torch.float32:
        raise ValueError(f"quantize_rows wants a 2-D fp32 tensor, got {x.dtype} {tuple(x.shape)}")
    amax = x.abs().amax(dim=1, keepdim=True)
    scale = torch.where(amax > 0, amax / fmt.max_value, torch.ones_like(amax))
    q = (x / scale).clamp(-fmt.max_value, fmt.max_value).to(fmt.torch_dtype())
    return q, scale


def _gained(rows: int, cols: int, gen: torch.Generator, unit: float) -> torch.Tensor:
    """Gaussian data whose rows have gains spread over e^[-1, 1], so each scale matters."""
    gains = torch.exp(torch.rand(rows, 1, generator=gen, device=gen.device) * 2 - 1)
    return torch.randn(rows, cols, generator=gen, device=gen.device) * gains * unit


def make_inputs(case: Case, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """(a [M,K] fp8, b [K,N] fp8 column-major, a_scale [M,1] fp32, b_scale [1,N] fp32).

    Drawn and quantized on the device (``seeded``), in the device's e4m3 encoding.
    """
    check_dtype(dtype)
    d = case.dims
    fmt = fp8_format_for_device(device)
    gen = seeded(device, seed)
    unit = d["K"] ** -0.25  # outputs of order one whatever K is
    a, a_scale = quantize_rows(_gained(d["M"], d["K"], gen, unit), fmt)
    w, w_scale = quantize_rows(_gained(d["N"], d["K"], gen, unit), fmt)
    b_scale = w_scale.reshape(1, d["N"]).contiguous()
    # The [N, K] weight transposed: b is a column-major view.
    return a, w.t(), a_scale, b_scale


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale


def reference(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor,
              b_scale: torch.Tensor) -> torch.Tensor:
    """fp32 product of the fp8 values (exact in fp32), scaled per row and per column.

    Equal, up to fp32 rounding, to dequantize(a, a_scale) @ dequantize(b.t(), b_scale.t()).t().
    """
    return (a.float() @ b.float()) * a_scale * b_scale


def scaled_mm(a, b, a_scale, b_scale):
    return torch._scaled_mm(a, b, scale_a=a_scale, scale_b=b_scale, out_dtype=torch.bfloat16)


def dequant_matmul(a, b, a_scale, b_scale):
    """Fallback: fp8 values are exact in bf16; bf16 GEMM (fp32 accumulate), then the scales."""
    c = torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16))
    return (c.float() * a_scale * b_scale).to(torch.bfloat16)


def scaled_mm_blocker(case: Case, device: str) -> str | None:
    """Why ``torch._scaled_mm`` with row-wise scales cannot run this case here (None: it can).

    Shape rules are checked first; then one small call on the device, because row-wise
    scaling depends on the GPU (sm_89+, gfx942 via hipBLASLt) and on the torch build.
    """
    bad = [k for k in ("M", "N", "K") if case.dims[k] % SCALED_MM_ALIGN]
    if bad:
        return f"{'/'.join(bad)} not a multiple of {SCALED_MM_ALIGN}"
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    probe = Case("probe", {"M": 16, "N": 32, "K": 64})
    try:
        scaled_mm(*make_inputs(probe, "fp8e4m3", device, 0))
    except (RuntimeError, NotImplementedError, TypeError) as err:
        return f"torch._scaled_mm row-wise failed on {device}: {type(err).__name__}: {err}"[:300]
    return None


def torch_build(case: Case, dtype: str, device: str) -> Build:
    check_dtype(dtype)
    blocker = scaled_mm_blocker(case, device)
    fn: Callable = scaled_mm
    config = {"library": "torch._scaled_mm", "scaling": "row-wise fp32 scales",
              "out_dtype": "bf16", "b_layout": "column-major (weight [N,K] viewed as .t())"}
    if blocker is not None:
        fn = dequant_matmul
        config = {"library": "dequantize + torch.matmul (bf16, fp32 accumulate)",
                  "out_dtype": "bf16", "why_not_scaled_mm": blocker}
    return Build(fn=fn, config=config)


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """The vendor library (cuBLASLt / hipBLASLt) through torch._scaled_mm: the baseline."""
    return torch_build(case, dtype, "cuda")
