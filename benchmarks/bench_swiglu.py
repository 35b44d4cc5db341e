"""SwiGLU: TileLang and Triton against F.silu(x) * g in torch."""

from kperf.suites import op_suites

(SwigluTime, SwigluEnergy, SwigluRegisters, SwigluScratch, SwigluSharedMem,
 SwigluOccupancy, SwigluCodeSize, SwigluCompile) = op_suites(
    "swiglu", __name__, codegen_case="llama3-8b.mlp",
    cases=["llama3-8b.mlp", "llama3-70b.mlp", "deepseek-v3.mlp", "deepseek-v3.expert_mlp"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
