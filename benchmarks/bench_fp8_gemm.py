"""FP8 e4m3 GEMM with row-wise scales: TileLang and Triton against torch._scaled_mm."""

from kperf.suites import op_suites

(Fp8GemmTime, Fp8GemmEnergy, Fp8GemmRegisters, Fp8GemmScratch, Fp8GemmSharedMem,
 Fp8GemmOccupancy, Fp8GemmCodeSize, Fp8GemmCompile) = op_suites(
    "fp8_gemm", __name__, codegen_case="llama3-70b.qkv_proj",
    cases=["llama3-70b.qkv_proj", "llama3-70b.down_proj", "deepseek-v3.dense_up_proj",
        "deepseek-v3.dense_down_proj", "llama3-70b.down_proj.decode16"],
    dtypes=["fp8e4m3"],
    backends=["tilelang", "triton", "torch"],
    codegen_dtypes=["fp8e4m3"])
