"""GEMM: TileLang and Triton against torch.matmul."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class GemmTime(_TimeSuite):
    op = "gemm"
    params = (
        ["square-4096", "square-8192", "llama3-8b.qkv_proj", "llama3-8b.gate_up_proj",
         "llama3-8b.down_proj", "llama3-70b.qkv_proj", "llama3-70b.down_proj",
         "deepseek-v3.q_b_proj", "llama3-8b.gate_up_proj.decode16"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


GemmEnergy = energy_suite(GemmTime)

(GemmRegisters, GemmScratch, GemmSharedMem, GemmOccupancy, GemmCodeSize,
 GemmCompile) = cpu_suites("Gemm", "gemm", "square-4096", __name__)
