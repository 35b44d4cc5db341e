"""The correctness check in ``kperf.core.prepare`` before any timing, at the op's tolerance.

A toy op (a real ``OpDef``: y = 2x in fp32, tolerance 1e-3 / 1e-3) with kernels that are
right, wrong, wrong by a few tolerances, NaN, or right only on the first input set; and
the real GEMM op at its fp16 tolerance with an output nudged by 0.3.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from kperf.core import checks
from kperf.core.prepare import prepare
from kperf.ops.op import Backend, Build, Case, OpDef
from kperf.ops.registry import get_op
from kperf.ops.targets import SM90A

TOL = (1e-3, 1e-3)  # the toy's (rtol, atol): ten times tighter than prepare's default


def _toy(fn_for: Callable[[], Callable[[torch.Tensor], torch.Tensor]]) -> OpDef:
    def make_inputs(case: Case, dtype: str, device: str, seed: int) -> tuple[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return (torch.randn(case.dims["N"], generator=gen).to(device),)

    def build(case: Case, dtype: str, target: object) -> Build:
        return Build(fn=fn_for(), config={"kernel": "toy"})

    return OpDef(name="toy", klass="bandwidth", cases=(Case("n4096", {"N": 4096}),),
                 dtypes=("fp32",), make_inputs=make_inputs, reference=lambda x: 2.0 * x,
                 flops=lambda case: 0.0, bytes_moved=lambda case, dtype: 8.0 * case.dims["N"],
                 backends={"toy": Backend("toy", build)}, tolerance={"fp32": TOL})


def _prepare(fn_for: Callable[[], Callable[[torch.Tensor], torch.Tensor]]):
    return prepare(_toy(fn_for), "n4096", "fp32", "toy", SM90A, device="cpu")


def test_a_right_kernel_is_prepared_with_its_agreement() -> None:
    p = _prepare(lambda: lambda x: 2.0 * x)
    assert p.what == "toy/n4096/fp32/toy" and p.config == {"kernel": "toy"}
    assert p.agreement.mismatched == 0 and p.agreement.total == 4096
    assert len(p.calls) == 16  # rotating input sets, each a call of the kernel


def test_a_wrong_kernel_is_refused_before_timing() -> None:
    with pytest.raises(checks.WrongResult, match=r"toy/n4096/fp32/toy: 4096 of 4096 values"):
        _prepare(lambda: lambda x: 2.0 * x + 1.0)


def test_a_nan_is_refused() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        out = 2.0 * x
        out[7] = float("nan")
        return out

    with pytest.raises(checks.WrongResult, match="1 of 4096 values are NaN or Inf"):
        _prepare(lambda: fn)


def test_a_kernel_right_only_on_the_first_input_set_is_refused() -> None:
    """A kernel that keeps returning its first output (it ignores its input) agrees on the
    first input set; the second set catches it."""

    def stale() -> Callable[[torch.Tensor], torch.Tensor]:
        first: list[torch.Tensor] = []

        def fn(x: torch.Tensor) -> torch.Tensor:
            if not first:
                first.append(2.0 * x)
            return first[0]

        return fn

    with pytest.raises(checks.WrongResult, match="toy/n4096/fp32/toy"):
        _prepare(stale)


def test_a_kernel_wrong_only_on_its_first_call_is_refused() -> None:
    """Right from the second call on (say, a buffer initialised only by the first launch):
    the first input set's check catches it."""

    def late() -> Callable[[torch.Tensor], torch.Tensor]:
        calls: list[int] = []

        def fn(x: torch.Tensor) -> torch.Tensor:
            calls.append(1)
            return 2.0 * x if len(calls) > 1 else torch.zeros_like(x)

        return fn

    with pytest.raises(checks.WrongResult, match="toy/n4096/fp32/toy"):
        _prepare(late)


# Errors a few times the toy's tolerance, each far inside 100 x that tolerance (and inside
# prepare's default 1e-2 / 1e-2): absolute (against atol) and relative (against rtol).
ERRORS = {"absolute": lambda x: 2.0 * x + 5 * TOL[1],
          "relative": lambda x: 2.0 * x * (1 + 5 * TOL[0])}
WITHIN = {"absolute": lambda x: 2.0 * x + 0.5 * TOL[1],
          "relative": lambda x: 2.0 * x * (1 + 0.5 * TOL[0])}


@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_the_check_holds_the_ops_own_tolerance(kind: str) -> None:
    with pytest.raises(checks.WrongResult, match=f"rtol={TOL[0]} atol={TOL[1]}"):
        _prepare(lambda: ERRORS[kind])
    p = _prepare(lambda: WITHIN[kind])  # half the tolerance passes
    assert p.agreement.mismatched == 0


def test_gemm_at_its_fp16_tolerance() -> None:
    """The real op's tolerance (fp16: 2e-2 / 2e-2) through prepare: torch.matmul agrees on
    the CPU test case; the same output with one value off by 0.3 (15 x atol, and outputs
    are O(1)) does not."""
    gemm = get_op("gemm")

    def nudged_build(case: Case, dtype: str, target: object) -> Build:
        def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            out = torch.matmul(a, b)
            out[5, 3] += 0.3
            return out

        return Build(fn=fn, config={"library": "torch.matmul, nudged"})

    on_cpu = dataclasses.replace(gemm, cases=tuple(gemm.test_cases))
    p = prepare(on_cpu, "test-ragged", "fp16", "torch", SM90A, device="cpu")
    assert p.agreement.mismatched == 0 and p.agreement.max_abs_err < 2e-2
    nudged = dataclasses.replace(on_cpu, backends={"torch": Backend("torch", nudged_build)})
    with pytest.raises(checks.WrongResult, match="gemm/test-ragged/fp16/torch: 1 of 7680"):
        prepare(nudged, "test-ragged", "fp16", "torch", SM90A, device="cpu")
