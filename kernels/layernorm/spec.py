"""LayerNorm y[m, :] = (x[m, :] - mean) / sqrt(var + eps) * w + b: one row per token.

Rows are tokens, columns the hidden size. fp16/bf16 in and out, fp32 statistics (mean and
biased variance, as torch.nn.functional.layer_norm). Memory-bound: x read once, y written once.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

# Falcon and GPT-NeoX use 1e-5 (BERT 1e-12, ViT 1e-6): eps does not change the traffic.
EPS = 1e-5

CASES = (
    # 16384 tokens (e.g. 4 sequences of 4096) through a decoder's pre-attention LayerNorm
    Case("falcon-40b.hidden", {"M": 16384, "N": 8192}, "537 MB moved in fp16", pr=True),
    Case("gpt-neox-20b.hidden", {"M": 16384, "N": 6144}, "hidden 6144: not a power of two"),
    # encoders: 16 sequences of 512 tokens (BERT-large), 16 images of 257 tokens (ViT-H/14)
    Case("bert-large.hidden", {"M": 8192, "N": 1024}, "34 MB moved"),
    Case("vit-h14.hidden", {"M": 4112, "N": 1280}, "257 tokens an image: ragged row count"),
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

# fp32 statistics over N, one rounding to the output dtype.
TOLERANCE = {"fp16": (5e-3, 5e-3), "bf16": (3e-2, 3e-2), "fp32": (1e-4, 1e-4)}


def flops(case: Case) -> float:
    """Per element: sum, centre, square, sum, scale by 1/std, scale by w, add b."""
    d = case.dims
    return 7.0 * d["M"] * d["N"]


def bytes_moved(case: Case, dtype: str) -> float:
    """Read x, w and b, write y."""
    d = case.dims
    return float(DTYPE_BYTES[dtype] * (2 * d["M"] * d["N"] + 2 * d["N"]))
