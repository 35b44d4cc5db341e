"""SwiGLU: TileLang and Triton against F.silu(x) * g in torch."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class SwigluTime(_TimeSuite):
    op = "swiglu"
    params = (
        ["llama3-8b.mlp", "llama3-70b.mlp", "deepseek-v3.mlp", "deepseek-v3.expert_mlp"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


SwigluEnergy = energy_suite(SwigluTime)

(SwigluRegisters, SwigluScratch, SwigluSharedMem, SwigluOccupancy, SwigluCodeSize,
 SwigluCompile) = cpu_suites("Swiglu", "swiglu", "llama3-8b.mlp", __name__)
