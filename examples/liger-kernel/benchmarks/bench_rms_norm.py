"""RMSNorm forward, Llama casting (Liger's rms_norm_forward): y = x / rms(x) * w."""

from kperf.suites import op_suites

(RmsNormTime, RmsNormEnergy, RmsNormRegisters, RmsNormScratch, RmsNormSharedMem,
 RmsNormOccupancy, RmsNormCodeSize, RmsNormCompile) = op_suites(
    "rms_norm", __name__, codegen_case="llama3-8b.hidden",
    cases=["llama3-8b.hidden", "gemma2-9b.hidden"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
