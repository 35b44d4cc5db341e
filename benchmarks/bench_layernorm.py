"""LayerNorm: TileLang and Triton against torch.nn.functional.layer_norm."""

from ._cpu_suites import cpu_suites
from ._suites import _TimeSuite, energy_suite


class LayernormTime(_TimeSuite):
    op = "layernorm"
    params = (
        ["falcon-40b.hidden", "gpt-neox-20b.hidden", "bert-large.hidden", "vit-h14.hidden"],
        ["fp16", "bf16"],
        ["tilelang", "triton", "torch"],
    )


LayernormEnergy = energy_suite(LayernormTime)

(LayernormRegisters, LayernormScratch, LayernormSharedMem, LayernormOccupancy, LayernormCodeSize,
 LayernormCompile) = cpu_suites("Layernorm", "layernorm", "falcon-40b.hidden", __name__)
