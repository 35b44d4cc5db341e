"""GEMM C[M, N] = A[M, K] @ B[K, N]: fp16/bf16 inputs, fp32 accumulation, output in the input dtype.

Cases are prefill-sized projections of real models (M = tokens in the batch), plus the
square shapes everyone quotes, plus one decode-sized case that is bandwidth-bound.
"""

from __future__ import annotations

from kperf.ops import DTYPE_BYTES, Case

CASES = (
    Case("square-4096", {"M": 4096, "N": 4096, "K": 4096}, "reference square shape"),
    Case("square-8192", {"M": 8192, "N": 8192, "K": 8192}, "power-capped on H200",
         pr=True),
    # Llama-3 8B: hidden 4096, 32 q heads + 8 kv heads of 128, MLP 14336; 4096 tokens
    Case("llama3-8b.qkv_proj", {"M": 4096, "N": 6144, "K": 4096}, "4096 + 2*8*128 outputs"),
    Case("llama3-8b.gate_up_proj", {"M": 4096, "N": 28672, "K": 4096}, "fused gate+up, 2*14336"),
    Case("llama3-8b.down_proj", {"M": 4096, "N": 4096, "K": 14336}),
    # Llama-3 70B: hidden 8192, 64 q heads + 8 kv heads of 128, MLP 28672; 8192 tokens
    Case("llama3-70b.qkv_proj", {"M": 8192, "N": 10240, "K": 8192}, "8192 + 2*8*128 outputs"),
    Case("llama3-70b.down_proj", {"M": 8192, "N": 8192, "K": 28672}),
    # DeepSeek-V3: q_b_proj lifts the 1536-d latent to 128 heads x 192
    Case("deepseek-v3.q_b_proj", {"M": 4096, "N": 24576, "K": 1536}),
    # decode: 16 sequences, one token each, through Llama-3 8B's fused gate+up
    Case("llama3-8b.gate_up_proj.decode16", {"M": 16, "N": 28672, "K": 4096}, "bandwidth-bound",
         klass="decode", pr=True),
)

DTYPES = ("fp16", "bf16")

# CPU tests under the Triton interpreter: ragged edges in every dimension.
TEST_CASES = (
    Case("test-ragged", {"M": 96, "N": 80, "K": 72}),
    Case("test-small-m", {"M": 8, "N": 64, "K": 160}),
)

# fp32 accumulation over K terms of unit-variance products; output rounded to 16 bits.
TOLERANCE = {"fp16": (2e-2, 2e-2), "bf16": (5e-2, 5e-2), "fp32": (1e-4, 1e-4)}


def flops(case: Case) -> float:
    d = case.dims
    return 2.0 * d["M"] * d["N"] * d["K"]


def bytes_moved(case: Case, dtype: str) -> float:
    d = case.dims
    return float(DTYPE_BYTES[dtype] * (d["M"] * d["K"] + d["K"] * d["N"] + d["M"] * d["N"]))
