"""Residual add and RMSNorm in one (Liger's fused_add_rms_norm_forward): s = x + r,
y = s / rms(s) * w."""

from kperf.ops import Case

from .._liger import liger_op

EPS = 1e-6


def _run(x, r, w):
    from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward

    return fused_add_rms_norm_forward(x, r, w, EPS, 0.0, "llama")[0]


def _reference(x, r, w):
    import torch

    s = x.double() + r.double()
    return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.double()


def _torch(x, r, w):
    import torch

    return torch.nn.functional.rms_norm(x + r, (x.shape[-1],), w, EPS)


OP = liger_op(
    "fused_add_rms_norm", "bandwidth", (Case("llama3-8b.hidden", {"M": 4096, "N": 4096}),),
    lambda c: {"x": (c.dims["M"], c.dims["N"]), "r": (c.dims["M"], c.dims["N"]),
               "w": (c.dims["N"],)},
    _run, _reference, _torch, 3, test_cases=(Case("test-ragged", {"M": 37, "N": 300}),))
