"""Flash-attention forward: TileLang and Triton against torch SDPA's flash backend."""

from kperf.suites import op_suites

(AttentionTime, AttentionEnergy, AttentionRegisters, AttentionScratch,
 AttentionSharedMem, AttentionOccupancy, AttentionCodeSize, AttentionCompile) = op_suites(
    "attention", __name__, codegen_case="llama3-8b.prefill-4k",
    cases=["llama3-8b.prefill-1k", "llama3-8b.prefill-4k", "llama3-8b.prefill-16k",
        "llama3-70b.prefill-8k", "llama3.2-1b.prefill-8k", "llama2-7b.prefill-4k",
        "sdxl-unet.attn1-64x64", "flux1-dev.joint-attn-1024px"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
