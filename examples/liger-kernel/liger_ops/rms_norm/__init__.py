"""RMSNorm forward, Llama casting (Liger's rms_norm_forward): y = x / rms(x) * w."""

from kperf.ops import Case

from .._liger import liger_op

EPS = 1e-6


def _run(x, w):
    from liger_kernel.ops.rms_norm import rms_norm_forward

    return rms_norm_forward(x, w, EPS, 0.0, "llama", False)[0]


def _reference(x, w):
    import torch

    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def _torch(x, w):
    import torch

    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)


OP = liger_op(
    "rms_norm", "bandwidth",
    (Case("llama3-8b.hidden", {"M": 4096, "N": 4096}),
     Case("gemma2-9b.hidden", {"M": 4096, "N": 3584})),
    lambda c: {"x": (c.dims["M"], c.dims["N"]), "w": (c.dims["N"],)},
    _run, _reference, _torch, 2, test_cases=(Case("test-ragged", {"M": 37, "N": 300}),))
