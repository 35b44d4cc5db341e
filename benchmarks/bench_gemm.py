"""GEMM: TileLang and Triton against torch.matmul (cuBLAS / hipBLASLt)."""

from kperf.suites import op_suites

(GemmTime, GemmEnergy, GemmRegisters, GemmScratch, GemmSharedMem, GemmOccupancy,
 GemmCodeSize, GemmCompile) = op_suites(
    "gemm", __name__, codegen_case="square-4096",
    cases=["square-4096", "square-8192", "llama3-8b.qkv_proj", "llama3-8b.gate_up_proj",
        "llama3-8b.down_proj", "llama3-70b.qkv_proj", "llama3-70b.down_proj",
        "deepseek-v3.q_b_proj", "llama3-8b.gate_up_proj.decode16"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
