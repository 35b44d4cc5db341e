"""RMSNorm: TileLang and Triton against torch.nn.functional.rms_norm."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class RmsnormTime(_TimeSuite):
    op = "rmsnorm"
    params = (
        ["llama3-8b.hidden", "llama3-70b.hidden", "deepseek-v3.hidden", "deepseek-v3.kv_a_norm"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


RmsnormEnergy = energy_suite(RmsnormTime)

(RmsnormRegisters, RmsnormScratch, RmsnormSharedMem, RmsnormOccupancy, RmsnormCodeSize,
 RmsnormCompile) = cpu_suites("Rmsnorm", "rmsnorm", "llama3-8b.hidden", __name__)
