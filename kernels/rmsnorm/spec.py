"""RMSNorm y[m, :] = x[m, :] / sqrt(mean(x[m, :]^2) + eps) * w: one row per token.

Rows are the tokens of a prefill batch, columns the hidden size the norm runs over.
fp16/bf16 in and out, fp32 statistics. Memory-bound: x is read once and y written once.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

# Llama-3 uses 1e-5, DeepSeek-V3 1e-6; one value for all cases keeps the reference simple,
# and eps changes nothing about the memory traffic being measured.
EPS = 1e-5

CASES = (
    # 16384 tokens (e.g. 4 sequences of 4096) through the pre-attention / pre-MLP norm
    Case("llama3-8b.hidden", {"M": 16384, "N": 4096}, "268 MB moved in fp16", pr=True),
    Case("llama3-70b.hidden", {"M": 16384, "N": 8192}, "537 MB moved"),
    Case("deepseek-v3.hidden", {"M": 16384, "N": 7168}, "hidden 7168: not a power of two"),
    # DeepSeek-V3 MLA: kv_a_layernorm is an RMSNorm over the 512-d compressed KV latent
    Case("deepseek-v3.kv_a_norm", {"M": 16384, "N": 512}, "narrow rows, 34 MB moved"),
)

DTYPES = ("fp16", "bf16")
# the dtype of the PR gate's default cases (``pr=True``)
PR_DTYPES = ("bf16",)

# CPU tests under the Triton interpreter: ragged column counts, rows not a multiple of a block.
TEST_CASES = (
    Case("test-ragged", {"M": 37, "N": 300}),
    Case("test-narrow", {"M": 45, "N": 48}),
    Case("test-wide", {"M": 5, "N": 3000}),
)

# One fp32 reduction over N, then one rounding to the output dtype (two with torch's path).
TOLERANCE = {"fp16": (5e-3, 5e-3), "bf16": (3e-2, 3e-2), "fp32": (1e-4, 1e-4)}


def flops(case: Case) -> float:
    """Per element: square, add to the sum, scale by 1/rms, scale by the weight."""
    d = case.dims
    return 4.0 * d["M"] * d["N"]


def bytes_moved(case: Case, dtype: str) -> float:
    """Read x and w, write y."""
    d = case.dims
    return float(DTYPE_BYTES[dtype] * (2 * d["M"] * d["N"] + d["N"]))
