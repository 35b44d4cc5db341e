"""Softmax: TileLang and Triton against torch.softmax."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class SoftmaxTime(_TimeSuite):
    op = "softmax"
    params = (
        ["llama3-8b.logits-4k", "llama3-8b.logits.decode64", "llama3-8b.attn-scores-2k",
         "llama3-8b.attn-scores-512"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class SoftmaxRegisters(_StaticFigure):
    op, case, figure, unit = "softmax", "llama3-8b.logits-4k", "registers", "registers"


class SoftmaxScratch(_StaticFigure):
    op, case, figure, unit = "softmax", "llama3-8b.logits-4k", "scratch_bytes", "bytes"


class SoftmaxSharedMem(_StaticFigure):
    op, case, figure, unit = "softmax", "llama3-8b.logits-4k", "shared_bytes", "bytes"


class SoftmaxOccupancy(_StaticFigure):
    op, case, figure, unit = "softmax", "llama3-8b.logits-4k", "occupancy", "waves"


class SoftmaxCompile(_CompileTime):
    op, case = "softmax", "llama3-8b.logits-4k"
