"""The cause of a step of a code series on the regressions page (a register count, LDS
bytes, an occupancy, code size, a cold compile): what changed in the generated code, in
the code's terms, as the PR gate says it (kperf/gate/codegen.py: "occupancy 3 → 2 waves,
limited by LDS: 16 → 32 KB"), from the codegen records (``<Op>CodeSize``: every figure of
the kernel's code, its tile configuration and the code's digest) of the commits either side
of the step, in the series' own environment (a gfx942 toolchain is one).
"""

from __future__ import annotations

import re
from typing import Any

from kperf.gate import codegen
from kperf.gate.look import static_cost
from kperf.site import data

CODE = re.compile(r"^(bench_\w+\.\w+?)(?:(?:Registers|Scratch|SharedMem|Occupancy|CodeSize)"
                  r"\.track_value|(Compile)\.track_compile)$")


def is_code(benchmark: str) -> bool:
    """A static figure's or a cold compile's series."""
    return CODE.match(benchmark) is not None


def figures_of(step: Any, side: Any, history: Any) -> dict[str, Any] | None:
    """A side's figures of the step's kernel: its latest codegen record at that commit in
    the series' environment, with the tile configuration under ``config``."""
    prefix = CODE.match(step.time_benchmark).group(1)
    key = data.point_key(step.machine, side.commit, f"{prefix}CodeSize.track_value", step.params)
    graph = step.graph_path or None
    envs = ({rf.env_name for rf in history.files_of(step.machine, side.commit, graph)}
            if graph else None)
    recs = [r for r in history.records_in(key, envs) if isinstance(r.get("figures"), dict)]
    if not recs:
        return None
    latest = max(recs, key=lambda r: float(r.get("recorded_at") or 0.0))
    return {**latest["figures"], "config": latest.get("config") or {}}


def explain(step: Any, idx: int, history: Any) -> None:
    """Fill a code step's cause: the kernel's line as the gate writes it, and for a cold
    compile its ratio, which is the code's only where the code changed too."""
    graph = step.graph_path or None
    before, after = (history.value(step.machine, s.commit, step.time_benchmark, idx, graph)
                     for s in (step.before, step.after))
    figures = [figures_of(step, s, history) for s in (step.before, step.after)]
    params = step.params
    kernel = codegen.Kernel(op=step.time_benchmark.split(".", 1)[0].removeprefix("bench_"),
                            case="", dtype=str(params.get("dtype", "")),
                            backend=str(params.get("backend", "")),
                            target=str(params.get("target", "")), toolchain=None,
                            base=figures[0], head=figures[1])
    line = codegen.cause_line(kernel).split(": ", 1)[-1]
    compiled = CODE.match(step.time_benchmark).group(2)
    if compiled and before and after:
        step.time_ratio = after / before
        line = f"cold compile x{after / before:.3f} ({before:.2f} → {after:.2f} CPU s); {line}"
    if None in figures:
        step.cause, step.why = "unknown", "no codegen record of this kernel on both sides"
    elif kernel.code_unchanged() and compiled:
        step.cause = "none"
        step.why = "the device code is the same on both sides: the compiler's own time moved"
    elif not compiled and not (cost := static_cost(*figures)).startswith("costs"):
        # the gate's rule (docs/gate.md): red only where it costs
        step.cause = "no-cost"
        step.why = f"the generated code changed; {cost}: not a regression by the gate's rule"
    else:
        step.cause, step.why = "code", "the generated code changed"
    step.text = line
    step.id = data.point_id(f"{step.machine}|{step.series}|{step.after.commit}")
