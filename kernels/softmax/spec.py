"""Row softmax y[m, :] = exp(x[m, :] - max) / sum(exp(x[m, :] - max)) over the last dimension.

Two kinds of rows from real models: attention scores (one row per head and query, as many
columns as keys) and LM-head logits (one row per token, a column per vocabulary entry; Llama-3
has 128256, too wide for one block, so kernels loop over the row). fp16/bf16 in and out, fp32
inside. Memory-bound: the minimum traffic is one read and one write of the matrix.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

LLAMA3_VOCAB = 128256

CASES = (
    # 4096 prefill tokens through Llama-3 8B's LM head: 2.1 GB moved in fp16
    Case("llama3-8b.logits-4k", {"M": 4096, "N": LLAMA3_VOCAB}, "looped row, 128256 wide",
         pr=True),
    # sampling the next token for 64 sequences: few rows, each too wide for one block
    Case("llama3-8b.logits.decode64", {"M": 64, "N": LLAMA3_VOCAB}, "33 MB, only 64 rows",
         klass="decode"),
    # unfused attention, 32 heads: 2048 queries x 2048 keys, and 512 x 512
    Case("llama3-8b.attn-scores-2k", {"M": 32 * 2048, "N": 2048}, "537 MB moved"),
    Case("llama3-8b.attn-scores-512", {"M": 32 * 512, "N": 512}, "34 MB moved"),
)

DTYPES = ("fp16", "bf16")
# the dtype of the PR gate's default cases (``pr=True``)
PR_DTYPES = ("bf16",)

# CPU tests under the Triton interpreter: ragged column counts, rows not a multiple of a
# block, and a row wider than one block so the looped kernel is the one selected.
TEST_CASES = (
    Case("test-ragged", {"M": 37, "N": 300}),
    Case("test-narrow", {"M": 45, "N": 48}),
    Case("test-wide-row", {"M": 3, "N": 9000}),
)

# Outputs of a 128256-wide row are ~1e-5, subnormal in fp16: atol is kept below them so the
# check still means something, and rtol covers one rounding to 16 bits.
TOLERANCE = {"fp16": (1e-2, 1e-6), "bf16": (2e-2, 1e-6), "fp32": (1e-4, 1e-7)}


def flops(case: Case) -> float:
    """Per element: max, subtract, exp, add to the sum, scale by 1/sum."""
    d = case.dims
    return 5.0 * d["M"] * d["N"]


def bytes_moved(case: Case, dtype: str) -> float:
    """Read x once, write y once (a looped kernel's second read is not counted)."""
    d = case.dims
    return float(DTYPE_BYTES[dtype] * 2 * d["M"] * d["N"])
