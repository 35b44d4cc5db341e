"""LayerNorm: TileLang and Triton against torch.nn.functional.layer_norm."""

from ._suites import _CompileTime, _StaticFigure, _TimeSuite


class LayernormTime(_TimeSuite):
    op = "layernorm"
    params = (
        ["falcon-40b.hidden", "gpt-neox-20b.hidden", "bert-large.hidden", "vit-h14.hidden"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


class LayernormRegisters(_StaticFigure):
    op, case, figure, unit = "layernorm", "falcon-40b.hidden", "registers", "registers"


class LayernormScratch(_StaticFigure):
    op, case, figure, unit = "layernorm", "falcon-40b.hidden", "scratch_bytes", "bytes"


class LayernormSharedMem(_StaticFigure):
    op, case, figure, unit = "layernorm", "falcon-40b.hidden", "shared_bytes", "bytes"


class LayernormOccupancy(_StaticFigure):
    op, case, figure, unit = "layernorm", "falcon-40b.hidden", "occupancy", "waves"


class LayernormCompile(_CompileTime):
    op, case = "layernorm", "falcon-40b.hidden"
