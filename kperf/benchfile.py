"""A project's ``benchmarks/bench_<op>.py``: written from an op's declaration, read back
to check that it is still in step with it.

The file names the op's cases, dtypes and backends as literals (asv discovers a suite
once, in one commit's environment, so names and parameters must not depend on the code
under test: DESIGN.md rule 2). ``kperf new-op`` writes it; ``kperf check`` and the
project's test compare it with the op, and ``kperf check --write`` writes it again.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kperf.suites import BASELINES, suite_names

WIDTH = 96


@dataclass(frozen=True)
class BenchSpec:
    """What a bench file says of its op."""

    op: str
    doc: str
    cases: tuple[str, ...]
    dtypes: tuple[str, ...]
    backends: tuple[str, ...]
    codegen_case: str
    codegen_dtypes: tuple[str, ...] = ("fp16",)


def spec_of_op(op: Any, doc: str = "") -> BenchSpec:
    """The bench file an op's declaration calls for: every case, dtype and backend, the
    first case (a representative one) for the generated code, fp16 where the op takes it."""
    dtypes = tuple(op.dtypes)
    codegen_dtype = "fp16" if "fp16" in dtypes else dtypes[0]
    backends = tuple(sorted(op.backends, key=lambda b: (b in BASELINES, b)))
    return BenchSpec(op.name, doc or f"{op.name}: its backends against its baseline.",
                     tuple(c.name for c in op.cases), dtypes, backends, op.cases[0].name,
                     (codegen_dtype,))


def render(spec: BenchSpec) -> str:
    """The text of ``benchmarks/bench_<op>.py``."""
    names = suite_names(spec.op)
    tail = ") = op_suites("
    args = [f'"{spec.op}", __name__, codegen_case="{spec.codegen_case}"',
            f"cases={_list(spec.cases)}", f"dtypes={_list(spec.dtypes)}",
            f"backends={_list(spec.backends)}"]
    if spec.codegen_dtypes != ("fp16",):
        args.append(f"codegen_dtypes={_list(spec.codegen_dtypes)}")
    call = ",\n".join(textwrap.fill(arg, WIDTH - 4, initial_indent="    ",
                                    subsequent_indent="        ", break_long_words=False,
                                    break_on_hyphens=False) for arg in args)
    head = textwrap.fill(", ".join(names), WIDTH - len(tail), initial_indent="(",
                         subsequent_indent=" ", break_on_hyphens=False) + tail
    doc = textwrap.fill(spec.doc, WIDTH - 6, break_on_hyphens=False)
    return (f'"""{doc}"""\n\nfrom kperf.suites import op_suites\n\n'
            f"{head}\n{call})\n")


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def read(module: Any) -> BenchSpec | None:
    """What an imported bench module says of its op (None: it makes no op's suites)."""
    time_suites = [v for v in vars(module).values()
                   if isinstance(v, type) and v.__name__.endswith("Time")
                   and v.__module__ == module.__name__ and getattr(v, "op", "")]
    if not time_suites:
        return None
    time = time_suites[0]
    compile_suites = [v for v in vars(module).values()
                      if isinstance(v, type) and v.__name__.endswith("Compile")
                      and v.__module__ == module.__name__]
    cases, dtypes, backends = (tuple(p) for p in time.params)
    codegen_case, codegen_dtypes = "", ("fp16",)
    if compile_suites:
        codegen_case = compile_suites[0].case
        codegen_dtypes = tuple(compile_suites[0].params[1])
    return BenchSpec(time.op, (module.__doc__ or "").strip(), cases, dtypes, backends,
                     codegen_case, codegen_dtypes)
