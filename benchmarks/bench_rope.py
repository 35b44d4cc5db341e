"""RoPE: rotary position embedding of queries or keys, TileLang and Triton against torch."""

from kperf.suites import op_suites

(RopeTime, RopeEnergy, RopeRegisters, RopeScratch, RopeSharedMem, RopeOccupancy,
 RopeCodeSize, RopeCompile) = op_suites(
    "rope", __name__, codegen_case="llama3-8b.q",
    cases=["llama3-8b.q", "llama3-8b.k", "llama3-70b.q", "llama3.2-1b.q"],
    dtypes=["fp16", "bf16"],
    backends=["tilelang", "triton", "torch"])
