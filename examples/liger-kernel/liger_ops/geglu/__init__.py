"""GEGLU forward, tanh GELU (Liger's geglu_forward): c = gelu_tanh(a) * b."""

from kperf.ops import Case

from .._liger import liger_op


def _run(a, b):
    from liger_kernel.ops.geglu import geglu_forward

    return geglu_forward(a, b)[2]


def _reference(a, b):
    import torch

    return torch.nn.functional.gelu(a.double(), approximate="tanh") * b.double()


def _torch(a, b):
    import torch

    return torch.nn.functional.gelu(a, approximate="tanh") * b


OP = liger_op(
    "geglu", "bandwidth", (Case("gemma-7b.mlp", {"M": 4096, "N": 24576}),),
    lambda c: {"a": (c.dims["M"], c.dims["N"]), "b": (c.dims["M"], c.dims["N"])},
    _run, _reference, _torch, 3, test_cases=(Case("test-ragged", {"M": 37, "N": 300}),))
