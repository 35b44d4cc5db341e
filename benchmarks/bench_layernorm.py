"""LayerNorm: TileLang and Triton against torch.nn.functional.layer_norm."""

from kperf.suites import op_suites

(LayernormTime, LayernormEnergy, LayernormRegisters, LayernormScratch,
 LayernormSharedMem, LayernormOccupancy, LayernormCodeSize, LayernormCompile) = op_suites(
    "layernorm", __name__, codegen_case="falcon-40b.hidden",
    cases=["falcon-40b.hidden", "gpt-neox-20b.hidden", "bert-large.hidden",
        "vit-h14.hidden"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
