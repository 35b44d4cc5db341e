"""What the Liger ops share: an OpDef from Liger's own call and a torch reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kperf.ops import Backend, Build, Case, OpDef, capture, seeded, torch_dtype

DTYPES = ("bf16",)
TOLERANCE = {"bf16": (5e-2, 5e-2), "fp16": (1e-2, 1e-2), "fp32": (1e-4, 1e-4)}


def liger_op(name: str, klass: str, cases: tuple[Case, ...], shapes: Callable[[Case], dict],
             run: Callable[..., Any], reference: Callable[..., Any],
             torch_fn: Callable[..., Any], bytes_per_element: int, kernel: str | None = None,
             grad: tuple[str, ...] = (), test_cases: tuple[Case, ...] = ()) -> OpDef:
    """An op whose Triton backend is Liger's ``run(*inputs)`` and whose baseline is
    ``torch_fn``; ``shapes(case)`` names each input's shape ({"x": (M, N), ...}; an
    integer-label input's name starts with ``labels``), ``grad`` the inputs a training
    step differentiates (the kernel then takes its gradient path)."""

    def make_inputs(case: Case, dtype: str, device: str, seed: int, empty: bool = False):
        import torch

        gen = None if empty else seeded(device, seed)
        out = []
        for key, shape in shapes(case).items():
            if key.startswith("labels"):
                t = (torch.zeros(shape, dtype=torch.long, device=device) if empty else
                     torch.randint(0, shape[-1] if len(shape) > 1 else 1000, shape,
                                   generator=gen, device=device))
            else:
                t = (torch.empty(shape, dtype=torch_dtype(dtype), device=device) if empty
                     else torch.randn(shape, generator=gen, device=device).to(torch_dtype(dtype)))
            out.append(t.requires_grad_(key in grad))
        return tuple(out)

    def build(case: Case, dtype: str, target: Any, **overrides: Any) -> Build:
        return Build(fn=run, config={"library": "liger_kernel"})

    def aot(case: Case, dtype: str, target: Any, **overrides: Any) -> dict[str, Any]:
        inputs = make_inputs(case, dtype, "cpu", 0, empty=True)
        return capture.artifacts(capture.compiled(lambda: run(*inputs), target, kernel), target)

    elements = lambda case: max(
        _prod(s) for k, s in shapes(case).items() if not k.startswith("labels"))
    return OpDef(
        name=name, klass=klass, cases=cases, dtypes=DTYPES, make_inputs=make_inputs,
        reference=reference, flops=lambda case: 5.0 * elements(case),
        bytes_moved=lambda case, dtype: float(bytes_per_element * 2 * elements(case)),
        backends={"triton": Backend("triton", build, aot),
                  "torch": Backend("torch", lambda c, d, t: Build(fn=torch_fn, config={}))},
        tolerance=TOLERANCE, test_cases=test_cases or cases[:1], test_dtypes=("fp32",))


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
