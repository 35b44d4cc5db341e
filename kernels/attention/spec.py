"""Flash-attention forward O = softmax(Q K^T * D**-0.5 [+ causal mask]) V, layout BHSD.

Q and O are (B, Hq, S, D); K and V are (B, Hkv, S, D) with Hq a multiple of Hkv (GQA:
query head h reads kv head h // (Hq // Hkv), the convention of SDPA's ``enable_gqa``).
Self-attention only: queries and keys have the same length S, and a causal mask keeps
key j for query i when j <= i. Inputs fp16/bf16, fp32 softmax and accumulation.

Cases are prefill (or image-token) attention of real models at their real head counts.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

DIM_KEYS = ("B", "Hq", "Hkv", "S", "D", "causal")


def _case(name: str, B: int, Hq: int, Hkv: int, S: int, D: int, causal: int,
          note: str = "", pr: bool = False) -> Case:
    return Case(name, {"B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal}, note,
                pr=pr)


CASES = (
    # Llama-3 8B: 32 q heads, 8 kv heads of 128 (GQA group 4), causal prefill
    _case("llama3-8b.prefill-1k", 8, 32, 8, 1024, 128, 1, "8 prompts of 1k tokens"),
    _case("llama3-8b.prefill-4k", 2, 32, 8, 4096, 128, 1, pr=True),
    _case("llama3-8b.prefill-16k", 1, 32, 8, 16384, 128, 1, "long context, one prompt"),
    # Llama-3 70B: 64 q heads, 8 kv heads of 128 (GQA group 8)
    _case("llama3-70b.prefill-8k", 1, 64, 8, 8192, 128, 1),
    # Llama-3.2 1B: 32 q heads, 8 kv heads of 64: the GQA head_dim-64 case
    _case("llama3.2-1b.prefill-8k", 1, 32, 8, 8192, 64, 1),
    # Llama-2 7B: plain MHA, 32 heads of 128, causal
    _case("llama2-7b.prefill-4k", 1, 32, 32, 4096, 128, 1, "MHA causal"),
    # SDXL UNet, 640-channel transformer blocks at 64x64 latent (1024 px): 10 heads of 64,
    # non-causal self-attention over 4096 image tokens; batch 2 = classifier-free guidance
    _case("sdxl-unet.attn1-64x64", 2, 10, 10, 4096, 64, 0, "MHA non-causal, d64"),
    # FLUX.1-dev joint attention at 1024 px: 24 heads of 128 over 512 text + 4096 image tokens
    _case("flux1-dev.joint-attn-1024px", 1, 24, 24, 4608, 128, 0, "MHA non-causal, d128"),
)

DTYPES = ("fp16", "bf16")
# the dtype of the PR gate's default cases (``pr=True``)
PR_DTYPES = ("bf16",)

# CPU tests under the Triton interpreter: GQA and MHA, causal and not, ragged lengths
# (not a multiple of any block), a second q-block so the causal off-diagonal loop runs.
TEST_CASES = (
    _case("test-gqa-causal", 1, 2, 1, 128, 64, 1),
    _case("test-mha-ragged", 1, 2, 2, 100, 64, 0),
    _case("test-gqa-causal-ragged-2blocks", 1, 2, 1, 200, 64, 1),
    _case("test-gqa-d128-ragged", 1, 4, 2, 72, 128, 0),
)

# Outputs are convex combinations of unit-variance V rows; error comes from rounding the
# probabilities P to the input dtype before the P @ V product (bf16 keeps 8 bits).
TOLERANCE = {"fp16": (1e-2, 1e-2), "bf16": (3e-2, 3e-2), "fp32": (1e-4, 1e-4)}


def flops(case: Case) -> float:
    """Two S x S x D products per head; a causal mask skips half of them."""
    d = case.dims
    total = 4.0 * d["B"] * d["Hq"] * d["S"] * d["S"] * d["D"]
    return total / 2 if d["causal"] else total


def bytes_moved(case: Case, dtype: str) -> float:
    """Q, K, V read once and O written once."""
    d = case.dims
    q_and_o = 2 * d["B"] * d["Hq"] * d["S"] * d["D"]
    k_and_v = 2 * d["B"] * d["Hkv"] * d["S"] * d["D"]
    return float(DTYPE_BYTES[dtype] * (q_and_o + k_and_v))


def check_dims(case: Case) -> dict[str, int]:
    """The case's dims, or a clear error naming the case and the bad field."""
    d = case.dims
    missing = [k for k in DIM_KEYS if k not in d]
    if missing:
        raise ValueError(f"attention case {case.name!r}: dims lack {missing}")
    if d["Hkv"] <= 0 or d["Hq"] % d["Hkv"]:
        raise ValueError(f"attention case {case.name!r}: Hq={d['Hq']} is not a multiple of "
                         f"Hkv={d['Hkv']}")
    if d["causal"] not in (0, 1):
        raise ValueError(f"attention case {case.name!r}: causal must be 0 or 1, not "
                         f"{d['causal']}")
    return d
