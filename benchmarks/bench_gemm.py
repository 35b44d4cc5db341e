"""GEMM: TileLang and Triton against torch.matmul."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class GemmTime(_TimeSuite):
    op = "gemm"
    params = (
        ["square-4096", "square-8192", "llama3-8b.qkv_proj", "llama3-8b.gate_up_proj",
         "llama3-8b.down_proj", "llama3-70b.qkv_proj", "llama3-70b.down_proj",
         "deepseek-v3.q_b_proj", "llama3-8b.gate_up_proj.decode16"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class GemmRegisters(_StaticFigure):
    op, case, figure, unit = "gemm", "square-4096", "registers", "registers"


class GemmScratch(_StaticFigure):
    op, case, figure, unit = "gemm", "square-4096", "scratch_bytes", "bytes"


class GemmSharedMem(_StaticFigure):
    op, case, figure, unit = "gemm", "square-4096", "shared_bytes", "bytes"


class GemmOccupancy(_StaticFigure):
    op, case, figure, unit = "gemm", "square-4096", "occupancy", "waves"


class GemmCompile(_CompileTime):
    op, case = "gemm", "square-4096"
