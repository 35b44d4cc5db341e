"""The asv suites of an op, made from literals in a project's ``benchmarks/bench_<op>.py``
(``kperf new-op`` writes the file; ``kperf check`` keeps it in step with the op)::

    from kperf.suites import op_suites

    (GemmTime, GemmEnergy, GemmRegisters, GemmScratch, GemmSharedMem, GemmOccupancy,
     GemmCodeSize, GemmCompile) = op_suites(
        "gemm", __name__, codegen_case="square-4096",
        cases=["square-4096", "square-8192"], dtypes=["fp16", "bf16"],
        backends=["tilelang", "triton", "torch"])

Names and parameters are written out, never read from the op: asv discovers the suite
once, in one commit's environment, and they must not depend on the code under test.
"""

from __future__ import annotations

from collections.abc import Sequence

from .cpu import TARGETS, cpu_suites
from .timed import _TimeSuite, energy_suite

SUFFIXES = ("Time", "Energy", "Registers", "Scratch", "SharedMem", "Occupancy", "CodeSize",
            "Compile")
BASELINES = ("torch",)  # backends that compile nothing of their own


def suite_prefix(op: str) -> str:
    """``fp8_gemm`` -> ``Fp8Gemm``: the start of each of an op's suite names."""
    return "".join(part[:1].upper() + part[1:] for part in op.split("_"))


def suite_names(op: str) -> list[str]:
    return [suite_prefix(op) + suffix for suffix in SUFFIXES]


def op_suites(op: str, module: str, *, cases: Sequence[str], dtypes: Sequence[str],
              backends: Sequence[str], codegen_case: str,
              codegen_dtypes: Sequence[str] = ("fp16",),
              codegen_backends: Sequence[str] | None = None,
              targets: Sequence[str] = TARGETS) -> tuple[type, ...]:
    """An op's suites, in the order of ``SUFFIXES``: time and energy per case x dtype x
    backend on a GPU; registers, scratch, LDS / shared memory, occupancy, code size and
    cold compile time of ``codegen_case`` per target x dtype x compiled backend
    (``codegen_backends``, default: ``backends`` but the baseline), on any machine."""
    prefix = suite_prefix(op)
    time = type(f"{prefix}Time", (_TimeSuite,), {
        "op": op, "params": (list(cases), list(dtypes), list(backends)), "__module__": module})
    compiled = [b for b in backends if b not in BASELINES] if codegen_backends is None \
        else list(codegen_backends)
    return (time, energy_suite(time),
            *cpu_suites(prefix, op, codegen_case, module, codegen_dtypes, compiled, targets))


def benchmarks_package(init_file: str) -> None:
    """What a project's ``benchmarks/__init__.py`` calls: the project is the folder above
    it (for the processes asv starts without kperf's environment), and the modules the
    fork server should import once are imported (``KPERF_PREIMPORT``).

    Those modules are only a speed-up: a benchmark process then does not pay for torch,
    Triton and TileLang again. TileLang's import initialises CUDA, which forked children
    cannot use; they never do: timed cases run in a measurement worker (kperf/core/worker.py),
    a fresh process. asv's discovery (``benchmark.py discover``) reads only names and
    parameters and pays for none of them."""
    import contextlib
    import importlib
    import os
    import sys
    from pathlib import Path

    from kperf import project

    os.environ.setdefault(project.PROJECT_ENV, str(Path(init_file).resolve().parent.parent))
    if sys.argv[1:2] != ["discover"]:
        for module in filter(None, os.environ.get("KPERF_PREIMPORT", "").split(",")):
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
