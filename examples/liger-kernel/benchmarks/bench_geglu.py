"""GEGLU forward, tanh GELU (Liger's geglu_forward): c = gelu_tanh(a) * b."""

from kperf.suites import op_suites

(GegluTime, GegluEnergy, GegluRegisters, GegluScratch, GegluSharedMem,
 GegluOccupancy, GegluCodeSize, GegluCompile) = op_suites(
    "geglu", __name__, codegen_case="gemma-7b.mlp",
    cases=["gemma-7b.mlp"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
