"""SwiGLU y = silu(x) * g elementwise: the gate of a gated MLP, between gate/up and down_proj.

x is the gate projection's output, g the up projection's, both [tokens, intermediate].
fp16/bf16 in and out, fp32 inside. The elementwise representative of the bandwidth-bound
ops: two reads and one write per element, nothing reused.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

CASES = (
    # same token counts as the GEMM cases of these models (4096 for 8B, 8192 for 70B)
    Case("llama3-8b.mlp", {"M": 4096, "N": 14336}, "352 MB moved in fp16", pr=True),
    Case("llama3-70b.mlp", {"M": 8192, "N": 28672}, "1.4 GB moved"),
    # DeepSeek-V3: the dense layers' MLP (18432), and one routed expert (2048) given 2048 tokens
    Case("deepseek-v3.mlp", {"M": 4096, "N": 18432}, "453 MB moved"),
    Case("deepseek-v3.expert_mlp", {"M": 2048, "N": 2048}, "25 MB moved"),
)

DTYPES = ("fp16", "bf16")
# the dtype of the PR gate's default cases (``pr=True``)
PR_DTYPES = ("bf16",)

# CPU tests under the Triton interpreter: sizes that no block divides.
TEST_CASES = (
    Case("test-ragged", {"M": 37, "N": 300}),
    Case("test-tiny", {"M": 3, "N": 100}),
)

# fp32 inside, one rounding to the output dtype (two along torch's silu-then-multiply path).
TOLERANCE = {"fp16": (5e-3, 5e-3), "bf16": (3e-2, 3e-2), "fp32": (1e-5, 1e-5)}


def flops(case: Case) -> float:
    """Per element: negate, exp, add 1, divide, multiply by g."""
    d = case.dims
    return 5.0 * d["M"] * d["N"]


def bytes_moved(case: Case, dtype: str) -> float:
    """Read x and g, write y."""
    d = case.dims
    return float(DTYPE_BYTES[dtype] * 3 * d["M"] * d["N"])
