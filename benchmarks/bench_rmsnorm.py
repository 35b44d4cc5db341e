"""RMSNorm: TileLang and Triton against torch.nn.functional.rms_norm."""

from kperf.suites import op_suites

(RmsnormTime, RmsnormEnergy, RmsnormRegisters, RmsnormScratch, RmsnormSharedMem,
 RmsnormOccupancy, RmsnormCodeSize, RmsnormCompile) = op_suites(
    "rmsnorm", __name__, codegen_case="llama3-8b.hidden",
    cases=["llama3-8b.hidden", "llama3-70b.hidden", "deepseek-v3.hidden",
        "deepseek-v3.kv_a_norm"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
