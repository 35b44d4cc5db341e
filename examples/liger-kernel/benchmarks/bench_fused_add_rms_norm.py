"""Residual add and RMSNorm in one (Liger's fused_add_rms_norm_forward): s = x + r, y = s /
rms(s) * w."""

from kperf.suites import op_suites

(FusedAddRmsNormTime, FusedAddRmsNormEnergy, FusedAddRmsNormRegisters,
 FusedAddRmsNormScratch, FusedAddRmsNormSharedMem, FusedAddRmsNormOccupancy,
 FusedAddRmsNormCodeSize, FusedAddRmsNormCompile) = op_suites(
    "fused_add_rms_norm", __name__, codegen_case="llama3-8b.hidden",
    cases=["llama3-8b.hidden"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
