"""LayerNorm forward (Liger's layer_norm_forward): y = (x - mean) / std * w + b."""

from kperf.suites import op_suites

(LayerNormTime, LayerNormEnergy, LayerNormRegisters, LayerNormScratch,
 LayerNormSharedMem, LayerNormOccupancy, LayerNormCodeSize, LayerNormCompile) = op_suites(
    "layer_norm", __name__, codegen_case="vit-h14.hidden",
    cases=["vit-h14.hidden"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
