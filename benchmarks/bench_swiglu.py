"""SwiGLU: TileLang and Triton against F.silu(x) * g in torch."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class SwigluTime(_TimeSuite):
    op = "swiglu"
    params = (
        ["llama3-8b.mlp", "llama3-70b.mlp", "deepseek-v3.mlp", "deepseek-v3.expert_mlp"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class SwigluRegisters(_StaticFigure):
    op, case, figure, unit = "swiglu", "llama3-8b.mlp", "registers", "registers"


class SwigluScratch(_StaticFigure):
    op, case, figure, unit = "swiglu", "llama3-8b.mlp", "scratch_bytes", "bytes"


class SwigluSharedMem(_StaticFigure):
    op, case, figure, unit = "swiglu", "llama3-8b.mlp", "shared_bytes", "bytes"


class SwigluOccupancy(_StaticFigure):
    op, case, figure, unit = "swiglu", "llama3-8b.mlp", "occupancy", "waves"


class SwigluCompile(_CompileTime):
    op, case = "swiglu", "llama3-8b.mlp"
