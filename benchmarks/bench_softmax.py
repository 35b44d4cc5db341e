"""Softmax: TileLang and Triton against torch.softmax."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class SoftmaxTime(_TimeSuite):
    op = "softmax"
    params = (
        ["llama3-8b.logits-4k", "llama3-8b.logits.decode64", "llama3-8b.attn-scores-2k",
         "llama3-8b.attn-scores-512"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


SoftmaxEnergy = energy_suite(SoftmaxTime)

(SoftmaxRegisters, SoftmaxScratch, SoftmaxSharedMem, SoftmaxOccupancy, SoftmaxCodeSize,
 SoftmaxCompile) = cpu_suites("Softmax", "softmax", "llama3-8b.logits-4k", __name__)
