"""What crosses a process boundary about a case, as typed structures: the case a tool names,
the requests a measurement worker answers (``kperf.suites.case.handle``, through
kperf/core/worker.py, pickled), and a case as the gate and the codegen runner plan it
(``kperf.suites.timed.gate_cases``; kept in gate-state.json, whose schema is
kperf/schemas/gate-state.json).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class CaseSpec(TypedDict):
    """One case of one op: what every tool measures."""

    op: str
    case: str
    dtype: str
    backend: str  # "tilelang", "triton" or "torch" (the baseline)
    overrides: NotRequired[dict[str, Any]]  # configuration fields: a tuning sweep


class PrepareRequest(TypedDict):
    """Build and check the case (compile outside timing); nothing where a measurement
    already awaits ``consumer``. ``batch``: the op's other cases, compiled ahead at once."""

    op: Literal["prepare"]
    spec: CaseSpec
    consumer: NotRequired[str | None]
    batch: NotRequired[list[CaseSpec] | None]


class MeasureRequest(TypedDict):
    """Time the case; ``plan``: fields of ``kperf.core.plan.Plan``."""

    op: Literal["measure"]
    spec: CaseSpec
    plan: NotRequired[dict[str, Any]]
    consumer: NotRequired[str | None]


class CodegenRequest(TypedDict):
    """Static figures (``static``) or cold compiles (``compile``, ``repeat`` times) of the
    case's kernel for ``target``, under a gfx942/gfx950 ``toolchain``."""

    op: Literal["static", "compile"]
    spec: CaseSpec
    target: str
    toolchain: NotRequired[str | None]
    repeat: NotRequired[int]


class WarmRequest(TypedDict):
    """Import what the cases need; the GPU is not touched."""

    op: Literal["warm"]
    specs: list[CaseSpec]


Request = PrepareRequest | MeasureRequest | CodegenRequest | WarmRequest


class GateCase(TypedDict):
    """A case of the gate's plan: a timed case, or a static figure or cold compile of a
    representative case for one target (and toolchain, once per toolchain)."""

    name: str  # asv's name: ``bench_gemm.GemmTime.track_time('square-4096', ...)``
    kind: Literal["time", "static", "compile"]
    unit: str
    spec: CaseSpec
    target: NotRequired[str]
    figure: NotRequired[str]  # a static suite's figure
    toolchain: NotRequired[str]
    toolchain_head: NotRequired[str]  # kperf upgrade: the head side's toolchain
    suite_case: NotRequired[str]  # the suite's own name of a per-toolchain case
    env: NotRequired[str]
