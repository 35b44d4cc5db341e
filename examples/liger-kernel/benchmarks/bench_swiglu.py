"""SwiGLU forward (Liger's swiglu_forward): c = silu(a) * b."""

from kperf.suites import op_suites

(SwigluTime, SwigluEnergy, SwigluRegisters, SwigluScratch, SwigluSharedMem,
 SwigluOccupancy, SwigluCodeSize, SwigluCompile) = op_suites(
    "swiglu", __name__, codegen_case="llama3-8b.mlp",
    cases=["llama3-8b.mlp"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
