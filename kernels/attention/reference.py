"""PyTorch reference, inputs and the SDPA baseline for flash-attention forward."""

from __future__ import annotations

import torch

from kperf.ops import Build, Case, Target, Unsupported, seeded, torch_dtype

from .spec import check_dims

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]


def make_inputs(case: Case, dtype: str, device: str, seed: int) -> Inputs:
    """(q, k, v, causal): unit-variance q, k, v, so q.k * D**-0.5 has unit variance too.

    ``causal`` rides along with the tensors because the reference is called with the
    inputs alone and must know whether to mask.
    """
    d = check_dims(case)
    gen = seeded(device, seed)
    tdtype = torch_dtype(dtype)

    def randn(heads: int) -> torch.Tensor:
        shape = (d["B"], heads, d["S"], d["D"])
        return torch.randn(shape, generator=gen, device=device).to(tdtype)

    return randn(d["Hq"]), randn(d["Hkv"]), randn(d["Hkv"]), bool(d["causal"])


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Explicit fp32 matmul-softmax-matmul, one head at a time.

    One head at a time so that the S x S scores of a 16k case stay at 1 GiB.
    """
    batch, q_heads, seq, dim = q.shape
    group = q_heads // k.shape[1]
    scale = dim ** -0.5
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    masked = None
    if causal:
        masked = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
    for b in range(batch):
        for h in range(q_heads):
            kv = h // group
            scores = (q[b, h].float() @ k[b, kv].float().T) * scale
            if masked is not None:
                scores.masked_fill_(masked, float("-inf"))
            out[b, h] = torch.softmax(scores, dim=-1) @ v[b, kv].float()
    return out


def _sdpa_has_gqa_flag() -> bool:
    from kperf.ops.compat import version_tuple

    return version_tuple(torch.__version__) >= (2, 5)  # enable_gqa arrived in torch 2.5


def _flash_accepts_gqa(dtype: torch.dtype) -> bool:
    """Probe once on the GPU: does the forced flash backend run with enable_gqa=True?"""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 4, 128, 64, device="cuda", dtype=dtype)
    kv = torch.randn(1, 2, 128, 64, device="cuda", dtype=dtype)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        torch.cuda.synchronize()
    except RuntimeError:
        return False
    return True


def build_torch(case: Case, dtype: str, target: Target) -> Build:
    """torch SDPA with the flash backend forced: FlashAttention-2/3 on CUDA, CK/AOTriton on ROCm.

    GQA goes through ``enable_gqa=True`` where the flash backend takes it; otherwise the
    kv heads are repeated inside the timed call, and the config says so.
    """
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    d = check_dims(case)
    if not torch.cuda.is_available():
        raise Unsupported(f"attention/{case.name}: the torch flash backend needs a GPU")
    tdtype = torch_dtype(dtype)
    causal = bool(d["causal"])
    group = d["Hq"] // d["Hkv"]
    if group == 1:
        gqa = "none (MHA)"
    elif _sdpa_has_gqa_flag() and _flash_accepts_gqa(tdtype):
        gqa = "enable_gqa"
    else:
        gqa = "repeat_interleave in the timed call"

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool):
        if is_causal != causal:
            raise ValueError(f"attention/{case.name}: built causal={causal}, called {is_causal}")
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            if gqa == "enable_gqa":
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            if group > 1:
                k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    config = {"library": "torch.nn.functional.scaled_dot_product_attention",
              "sdpa_backend": "FLASH_ATTENTION", "gqa": gqa, "torch": torch.__version__}
    return Build(fn=attention, config=config)
