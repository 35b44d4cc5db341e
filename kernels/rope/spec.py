"""Rotary position embedding (GPT-NeoX / Llama layout): each head's vector of D values is
split in halves x1, x2 and rotated by the position's angles,

    y1 = x1 cos - x2 sin,   y2 = x2 cos + x1 sin,

with cos and sin of shape [tokens, D / 2] shared by every head. x is [tokens, heads x D]
(a projection's output as it comes), fp16/bf16 in and out, fp32 inside: one read of x,
one write of y, cos and sin read once a token.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

CASES = (
    # Llama-3 8B: 32 query heads and 8 key heads of 128, 4096 tokens
    Case("llama3-8b.q", {"M": 4096, "H": 32, "D": 128}, "32 heads of 128", pr=True),
    Case("llama3-8b.k", {"M": 4096, "H": 8, "D": 128}, "8 kv heads"),
    # Llama-3 70B: 64 query heads of 128, 8192 tokens
    Case("llama3-70b.q", {"M": 8192, "H": 64, "D": 128}, "1 GB moved in fp16"),
    # Llama-3.2 1B: heads of 64
    Case("llama3.2-1b.q", {"M": 8192, "H": 32, "D": 64}, "head_dim 64"),
)

DTYPES = ("fp16", "bf16")
# the dtype of the PR gate's default cases (``pr=True``)
PR_DTYPES = ("bf16",)

# CPU tests under the Triton interpreter: a ragged token count, two head sizes.
TEST_CASES = (
    Case("test-ragged", {"M": 37, "H": 3, "D": 64}),
    Case("test-d32", {"M": 5, "H": 2, "D": 32}),
)

# fp32 inside, one rounding to the output dtype.
TOLERANCE = {"fp16": (5e-3, 5e-3), "bf16": (3e-2, 3e-2), "fp32": (1e-5, 1e-5)}


def check_dims(case: Case) -> None:
    if case.dims["D"] % 2:
        raise ValueError(f"rope case {case.name}: head_dim D={case.dims['D']} must be even")


def flops(case: Case) -> float:
    """Per pair: four multiplies and two adds."""
    d = case.dims
    return 3.0 * d["M"] * d["H"] * d["D"]


def bytes_moved(case: Case, dtype: str) -> float:
    """Read x, write y, read cos and sin once."""
    d = case.dims
    return float(DTYPE_BYTES[dtype] * (2 * d["M"] * d["H"] * d["D"] + d["M"] * d["D"]))
