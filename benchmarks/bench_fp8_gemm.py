"""FP8 e4m3 GEMM with row-wise scales: TileLang and Triton against torch._scaled_mm."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class Fp8GemmTime(_TimeSuite):
    op = "fp8_gemm"
    params = (
        ["llama3-70b.qkv_proj", "llama3-70b.down_proj", "deepseek-v3.dense_up_proj",
         "deepseek-v3.dense_down_proj", "llama3-70b.down_proj.decode16"],
        ["fp8e4m3"],
        ["tilelang", "triton", "torch"],
    )


Fp8GemmEnergy = energy_suite(Fp8GemmTime)

(Fp8GemmRegisters, Fp8GemmScratch, Fp8GemmSharedMem, Fp8GemmOccupancy, Fp8GemmCodeSize,
 Fp8GemmCompile) = cpu_suites("Fp8Gemm", "fp8_gemm", "llama3-70b.qkv_proj", __name__,
                              dtypes=("fp8e4m3",))
