"""Softmax: TileLang and Triton against torch.softmax."""

from kperf.suites import op_suites

(SoftmaxTime, SoftmaxEnergy, SoftmaxRegisters, SoftmaxScratch, SoftmaxSharedMem,
 SoftmaxOccupancy, SoftmaxCodeSize, SoftmaxCompile) = op_suites(
    "softmax", __name__, codegen_case="llama3-8b.logits-4k",
    cases=["llama3-8b.logits-4k", "llama3-8b.logits.decode64", "llama3-8b.attn-scores-2k",
        "llama3-8b.attn-scores-512"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
