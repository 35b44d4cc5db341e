"""Turn one op case into timed calls: inputs, build, correctness check, rotating buffers.

The op is passed in (duck-typed like ``kperf.ops.op.OpDef``), so the measurement core
never imports the code under test. Both asv suites and ``kperf.history.perf`` prepare cases
through here, so both check and time a case the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kperf.core import checks


@dataclass
class Prepared:
    what: str  # "op/case/dtype/backend"
    calls: list[Callable[[], Any]]  # one launch per rotating input set
    config: dict[str, Any]  # the configuration the backend chose (tiles, stages, library)
    agreement: checks.Agreement
    flops: float
    bytes_moved: float
    first_call_s: float  # build + first call: compile (and JIT) time as a user meets it
    fn: Callable[..., Any] | None = None  # the built kernel, for inputs placed elsewhere
    inputs: list[tuple[Any, ...]] = field(default_factory=list)  # one tuple per call


# Placed buffers start on 4 KiB boundaries (kperf/suites/case.py, kperf/core/outputs.py).
ALIGN_BYTES = 4096


def span_bytes(nbytes: int) -> int:
    """Bytes a buffer of ``nbytes`` takes among placed ones: rounded up to ``ALIGN_BYTES``."""
    return -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES


def case_what(op_name: str, case_name: str, dtype: str, backend_name: str) -> str:
    """"op/case/dtype/backend": how a case is named in errors and keyed among builds."""
    return f"{op_name}/{case_name}/{dtype}/{backend_name}"


def calls_over(fn: Callable[..., Any], inputs: list[tuple[Any, ...]]
               ) -> list[Callable[[], Any]]:
    """One zero-argument launch of ``fn`` per input set."""
    return [lambda x=x: fn(*x) for x in inputs]


def rotating_sets(bytes_per_set: float, cache_bytes: int, max_sets: int = 16) -> int:
    """Enough input sets that cycling through them evicts the last-level cache."""
    return int(min(max_sets, max(1, (2 * cache_bytes) // max(int(bytes_per_set), 1))))


def prepare(op: Any, case_name: str, dtype: str, backend_name: str, target: Any,
            device: str = "cuda", max_sets: int = 16,
            overrides: dict[str, Any] | None = None,
            builds: dict[Any, tuple[Any, float]] | None = None) -> Prepared:
    """Build and verify; raises ``checks.WrongResult`` (or the build's error) on failure.

    ``overrides`` replace fields of the backend's default configuration (a tuning sweep).
    ``builds`` keeps compiled kernels between calls (a measurement worker): a case prepared
    again gets fresh inputs and a fresh check, but no second compile; its ``first_call_s``
    stays the one measured when it was compiled."""
    import torch

    case = op.case(case_name)
    backend = op.backend(backend_name, case_name)
    what = case_what(op.name, case_name, dtype, backend_name)
    bytes_moved = op.bytes_moved(case, dtype)
    sets = rotating_sets(bytes_moved, target.l2_bytes, max_sets)
    inputs = [op.make_inputs(case, dtype, device, seed) for seed in range(sets)]
    key = (what, target.name, tuple(sorted((overrides or {}).items())))
    if builds is not None and key in builds:
        built, first_call_s = builds[key]
        first_out = built.fn(*inputs[0])
    else:
        start = time.perf_counter()  # host timer on purpose: compiling is host work
        built = backend.build(case, dtype, target, **(overrides or {}))
        first_out = built.fn(*inputs[0])
        if device != "cpu":
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        if builds is not None:
            builds[key] = (built, first_call_s)
    rtol, atol = op.tolerance.get(dtype, (1e-2, 1e-2))
    agreement = checks.compare_outputs(first_out, op.reference(*inputs[0]), rtol, atol, what)
    if len(inputs) > 1:  # a second input set catches kernels that only work on one
        checks.compare_outputs(built.fn(*inputs[1]), op.reference(*inputs[1]), rtol, atol,
                               what)
    return Prepared(
        what=what,
        calls=calls_over(built.fn, inputs),
        config=dict(built.config),
        agreement=agreement,
        flops=op.flops(case),
        bytes_moved=bytes_moved,
        first_call_s=first_call_s,
        fn=built.fn,
        inputs=inputs,
    )
