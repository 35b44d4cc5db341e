"""Flash-attention forward: TileLang and Triton against torch SDPA's flash backend."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class AttentionTime(_TimeSuite):
    op = "attention"
    params = (
        ["llama3-8b.prefill-1k", "llama3-8b.prefill-4k", "llama3-8b.prefill-16k",
         "llama3-70b.prefill-8k", "llama3.2-1b.prefill-8k", "llama2-7b.prefill-4k",
         "sdxl-unet.attn1-64x64", "flux1-dev.joint-attn-1024px"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


AttentionEnergy = energy_suite(AttentionTime)

(AttentionRegisters, AttentionScratch, AttentionSharedMem, AttentionOccupancy, AttentionCodeSize,
 AttentionCompile) = cpu_suites("Attention", "attention", "llama3-8b.prefill-4k", __name__)
