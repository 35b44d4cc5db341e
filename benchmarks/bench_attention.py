"""Flash-attention forward: TileLang and Triton against torch SDPA's flash backend."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class AttentionTime(_TimeSuite):
    op = "attention"
    params = (
        ["llama3-8b.prefill-1k", "llama3-8b.prefill-4k", "llama3-8b.prefill-16k",
         "llama3-70b.prefill-8k", "llama3.2-1b.prefill-8k", "llama2-7b.prefill-4k",
         "sdxl-unet.attn1-64x64", "flux1-dev.joint-attn-1024px"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class AttentionRegisters(_StaticFigure):
    op, case, figure, unit = "attention", "llama3-8b.prefill-4k", "registers", "registers"


class AttentionScratch(_StaticFigure):
    op, case, figure, unit = "attention", "llama3-8b.prefill-4k", "scratch_bytes", "bytes"


class AttentionSharedMem(_StaticFigure):
    op, case, figure, unit = "attention", "llama3-8b.prefill-4k", "shared_bytes", "bytes"


class AttentionOccupancy(_StaticFigure):
    op, case, figure, unit = "attention", "llama3-8b.prefill-4k", "occupancy", "waves"


class AttentionCompile(_CompileTime):
    op, case = "attention", "llama3-8b.prefill-4k"
