"""FP8 e4m3 GEMM with row-wise scales: TileLang and Triton against torch._scaled_mm."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite

# The figure and compile suites default to ["fp16"]; this op's only input format is fp8e4m3.
_FIGURE_PARAMS = (["gfx942", "sm_90a"], ["fp8e4m3"], ["tilelang", "triton"])


class Fp8GemmTime(_TimeSuite):
    op = "fp8_gemm"
    params = (
        ["llama3-70b.qkv_proj", "llama3-70b.down_proj", "deepseek-v3.dense_up_proj",
         "deepseek-v3.dense_down_proj", "llama3-70b.down_proj.decode16"],
        ["fp8e4m3"],
        ["tilelang", "triton", "torch"],
    )


class Fp8GemmRegisters(_StaticFigure):
    op, case, figure, unit = "fp8_gemm", "llama3-70b.qkv_proj", "registers", "registers"
    params = _FIGURE_PARAMS


class Fp8GemmScratch(_StaticFigure):
    op, case, figure, unit = "fp8_gemm", "llama3-70b.qkv_proj", "scratch_bytes", "bytes"
    params = _FIGURE_PARAMS


class Fp8GemmSharedMem(_StaticFigure):
    op, case, figure, unit = "fp8_gemm", "llama3-70b.qkv_proj", "shared_bytes", "bytes"
    params = _FIGURE_PARAMS


class Fp8GemmOccupancy(_StaticFigure):
    op, case, figure, unit = "fp8_gemm", "llama3-70b.qkv_proj", "occupancy", "waves"
    params = _FIGURE_PARAMS


class Fp8GemmCompile(_CompileTime):
    op, case = "fp8_gemm", "llama3-70b.qkv_proj"
    params = _FIGURE_PARAMS
