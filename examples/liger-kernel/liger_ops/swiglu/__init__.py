"""SwiGLU forward (Liger's swiglu_forward): c = silu(a) * b."""

from kperf.ops import Case

from .._liger import liger_op


def _run(a, b):
    from liger_kernel.ops.swiglu import swiglu_forward

    return swiglu_forward(a, b)[2]


def _reference(a, b):
    import torch

    return torch.nn.functional.silu(a.double()) * b.double()


def _torch(a, b):
    import torch

    return torch.nn.functional.silu(a) * b


OP = liger_op(
    "swiglu", "bandwidth", (Case("llama3-8b.mlp", {"M": 4096, "N": 14336}),),
    lambda c: {"a": (c.dims["M"], c.dims["N"]), "b": (c.dims["M"], c.dims["N"])},
    _run, _reference, _torch, 3, test_cases=(Case("test-ragged", {"M": 37, "N": 300}),))
