"""RMSNorm: TileLang and Triton against torch.nn.functional.rms_norm."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class RmsnormTime(_TimeSuite):
    op = "rmsnorm"
    params = (
        ["llama3-8b.hidden", "llama3-70b.hidden", "deepseek-v3.hidden", "deepseek-v3.kv_a_norm"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class RmsnormRegisters(_StaticFigure):
    op, case, figure, unit = "rmsnorm", "llama3-8b.hidden", "registers", "registers"


class RmsnormScratch(_StaticFigure):
    op, case, figure, unit = "rmsnorm", "llama3-8b.hidden", "scratch_bytes", "bytes"


class RmsnormSharedMem(_StaticFigure):
    op, case, figure, unit = "rmsnorm", "llama3-8b.hidden", "shared_bytes", "bytes"


class RmsnormOccupancy(_StaticFigure):
    op, case, figure, unit = "rmsnorm", "llama3-8b.hidden", "occupancy", "waves"


class RmsnormCompile(_CompileTime):
    op, case = "rmsnorm", "llama3-8b.hidden"
