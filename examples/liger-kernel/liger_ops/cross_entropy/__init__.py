"""Cross entropy of a training step (Liger's cross_entropy_forward with logits that need
their gradient): the mean loss, the gradient written over a copy of the logits, as
Liger's kernel does in training. The timed call includes that copy."""

from kperf.ops import Case

from .._liger import liger_op


def _run(x, labels):
    from liger_kernel.ops.cross_entropy import cross_entropy_forward

    logits = x.detach().clone().requires_grad_(True)  # the kernel overwrites its input
    return cross_entropy_forward(logits, labels, None, -100, 0.0, 0.0, "mean", None,
                                 False)[0]


def _reference(x, labels):
    import torch

    return torch.nn.functional.cross_entropy(x.double(), labels)


def _torch(x, labels):
    import torch

    return torch.nn.functional.cross_entropy(x.float(), labels)


OP = liger_op(
    "cross_entropy", "bandwidth", (Case("llama3-8b.logits", {"M": 4096, "V": 128256}),),
    lambda c: {"x": (c.dims["M"], c.dims["V"]), "labels": (c.dims["M"],)},
    _run, _reference, _torch, 2, kernel="liger_cross_entropy_kernel", grad=("x",),
    test_cases=(Case("test-ragged", {"M": 37, "V": 1000}),))
