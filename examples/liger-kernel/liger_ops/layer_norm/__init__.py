"""LayerNorm forward (Liger's layer_norm_forward): y = (x - mean) / std * w + b."""

from kperf.ops import Case

from .._liger import liger_op

EPS = 1e-6


def _run(x, w, b):
    from liger_kernel.ops.layer_norm import layer_norm_forward

    return layer_norm_forward(x, w, b, EPS)[0]


def _reference(x, w, b):
    import torch

    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w.double(), b.double(),
                                          EPS)


def _torch(x, w, b):
    import torch

    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, EPS)


OP = liger_op(
    "layer_norm", "bandwidth", (Case("vit-h14.hidden", {"M": 4096, "N": 1280}),),
    lambda c: {"x": (c.dims["M"], c.dims["N"]), "w": (c.dims["N"],), "b": (c.dims["N"],)},
    _run, _reference, _torch, 2, test_cases=(Case("test-ragged", {"M": 37, "N": 300}),))
