"""Cross entropy of a training step (Liger's cross_entropy_forward with logits that need
their gradient): the mean loss, the gradient written over a copy of the logits, as Liger's
kernel does in training. The timed call includes that copy."""

from kperf.suites import op_suites

(CrossEntropyTime, CrossEntropyEnergy, CrossEntropyRegisters, CrossEntropyScratch,
 CrossEntropySharedMem, CrossEntropyOccupancy, CrossEntropyCodeSize,
 CrossEntropyCompile) = op_suites(
    "cross_entropy", __name__, codegen_case="llama3-8b.logits",
    cases=["llama3-8b.logits"],
    dtypes=["bf16"],
    backends=["triton", "torch"],
    codegen_dtypes=["bf16"])
