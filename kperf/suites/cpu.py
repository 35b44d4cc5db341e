"""The suites that need no GPU: static figures, code size and cold compile time of one
representative case of an op, for each target (``cpu_suites`` makes them for a bench
module). Names starting with ``_`` are invisible to asv's discovery.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from kperf.core import hip, record, static

from .digests import COMPILE_POLICY, compile_digest, timed_elsewhere
from .static import (
    PRIMER,
    codegen_record_root,
    cold_compile,
    compile_record_root,
    keep_static_figures,
    static_figures,
)


def _bench_name(obj: object, method: str) -> str:
    """``bench_<op>.<Suite>.<method>``: the name asv, the records and the gate give a
    suite's benchmark."""
    module = type(obj).__module__.split(".", 1)[-1]  # asv names it without its package
    return f"{module}.{type(obj).__name__}.{method}"


class _StaticFigure:
    """One static figure of the code generated for a target: registers, LDS bytes, ..."""

    op: str = ""
    case: str = ""
    figure: str = ""
    unit: str = ""
    params = (["gfx942", "gfx950", "sm_90a"], ["fp16"], ["tilelang", "triton"])
    param_names = ("target", "dtype", "backend")
    timeout = 600

    def setup(self, target: str, dtype: str, backend: str) -> None:
        what = f"{self.op}/{self.case}/{dtype}/{backend}@{target}"
        result = static_figures(self.op, self.case, dtype, backend, target)
        if self.figure not in result["figures"]:
            raise static.FigureUnavailable(
                f"{what}: {self.figure} not derivable from artifacts {result['artifacts']}")
        self.value = result["figures"][self.figure]

    def track_value(self, target: str, dtype: str, backend: str) -> float:
        return self.value


class _Codegen(_StaticFigure):
    """Code size, and a record of every static figure of the kernel (registers, spills,
    LDS, occupancy and its limit, the instruction mix) for the site's codegen page, named
    by the gfx942 toolchain that compiled it."""

    figure = "code_bytes"
    unit = "bytes"

    def setup(self, target: str, dtype: str, backend: str) -> None:
        result = static_figures(self.op, self.case, dtype, backend, target)
        params = dict(zip(self.param_names, (target, dtype, backend), strict=True))
        record.write_record(_bench_name(self, "track_value"), params, {
            "kind": "codegen", "op": self.op, "case": self.case,
            "toolchain": hip.toolchain_name(target) if target.startswith("gfx") else None,
            "figures": result["figures"], "config": result["config"],
            "recorded_at": time.time()}, codegen_record_root())
        super().setup(target, dtype, backend)


class _CompileTime:
    """Cold-cache compile time for a target, in CPU seconds (the compiling process's and its
    compilers'), in a process whose compiler is already loaded.

    Every pair is a full compile to a device binary: Triton to a hsaco or cubin, TileLang
    sm_90a with nvcc to a cubin, TileLang gfx942 to HIP source and on to a code object by
    the run's gfx942 toolchain (``kperf.core.hip``, hipcc's stand-in), so the two languages'
    times compare like with like.
    """

    op: str = ""
    case: str = ""
    params = (["gfx942", "gfx950", "sm_90a"], ["fp16"], ["tilelang", "triton"])
    param_names = ("target", "dtype", "backend")
    timeout = 900
    repeat = 3

    def setup(self, target: str, dtype: str, backend: str) -> None:
        from kperf.ops.registry import get_op
        from kperf.ops.targets import get_target

        op = get_op(self.op)
        self.case_def, self.be = op.case(self.case), op.backend(backend, self.case)
        if self.be.aot is None:
            raise NotImplementedError(f"{self.op}/{backend} has no ahead-of-time compile path")
        self.target = get_target(target)
        self.compile_key = compile_digest(self.op, backend, target)
        where = timed_elsewhere(COMPILE_POLICY, _bench_name(self, "track_compile"),
                                self._params(target, dtype, backend), "compile_key",
                                self.compile_key, compile_record_root())
        if where:
            raise NotImplementedError(
                f"{self.op}/{self.case}/{dtype}/{backend}@{target}: its kernel source and "
                f"compilers are unchanged since commit {where}, whose cold compiles this "
                f"machine timed; {COMPILE_POLICY}=every times them at every commit")
        self._prime(backend, dtype)

    def _params(self, target: str, dtype: str, backend: str) -> dict[str, str]:
        return dict(zip(self.param_names, (target, dtype, backend), strict=True))

    def _prime(self, backend: str, dtype: str) -> None:
        """Untimed: the process's one-off initialisation, paid on a small kernel.

        A process's first cold compile took 1.7-8.8x its next three for Triton and up to
        1.4x for TileLang; after an untimed RMSNorm compile for the same target and
        backend, the op's first took what its next three took, and the RMSNorm compile
        cost 0.4-2.5 s where the op's own first took 0.8-6.4 s (CPU machine, 2026-12-02,
        docs/journal/2026-12-02.md "The compile suites' first compile"). Without a primer at this
        commit, or one this stack cannot build, the op's own kernel primes, which also
        turns a kernel this stack cannot build into a skip here."""
        from kperf.ops.registry import get_op

        try:
            primer = get_op(PRIMER[0])
            self._compile_cold(primer.backend(backend, PRIMER[1]), primer.case(PRIMER[1]),
                               "fp16")
        except Exception:  # any failure of the primer: the op primes, as before
            self._compile_cold(self.be, self.case_def, dtype)

    def _compile_cold(self, be: Any, case_def: Any, dtype: str) -> tuple[float, dict[str, Any]]:
        """(CPU seconds, artifacts) of a compile with empty compiler caches; its wall
        seconds go to ``wall_samples``. The series is CPU time: on a host that other
        processes share, a compile's wall time moved 10% (CoV) and ran at 2.7x its CPU time
        while its CPU time moved 3% (docs/perf.md, "Compile time on a shared host")."""
        compiled = cold_compile(be, case_def, dtype, self.target)
        vars(self).setdefault("wall_samples", []).append(compiled.wall_s)
        return compiled.cpu_s, compiled.artifacts

    def track_compile(self, target: str, dtype: str, backend: str) -> dict[str, Any]:
        from asv_runner.benchmarks.mark import SkipNotImplemented

        samples, self.wall_samples = [], []
        for _ in range(self.repeat):
            try:
                seconds, artifacts = self._compile_cold(self.be, self.case_def, dtype)
            except NotImplementedError as err:  # this stack cannot build it: asv's skip
                raise SkipNotImplemented(str(err)) from err
            if not samples:  # the figure suites (asv runs them next) need not compile it
                with contextlib.suppress(Exception):  # they then compile and report
                    keep_static_figures({"op": self.op, "case": self.case, "dtype": dtype,
                                         "backend": backend, "target": target}, artifacts,
                                        self.target.vendor)
            samples.append(seconds)
        record.write_record(_bench_name(self, "track_compile"),
                            self._params(target, dtype, backend),
                            {"kind": "compile", "compile_key": self.compile_key,
                             "samples": samples, "wall_s": self.wall_samples,
                             "recorded_at": time.time()},
                            compile_record_root())
        return {"samples": samples, "number": 1}

    track_compile.unit = "seconds"



_FIGURES = (("Registers", "registers", "registers"), ("Scratch", "scratch_bytes", "bytes"),
            ("SharedMem", "shared_bytes", "bytes"), ("Occupancy", "occupancy", "waves"))


TARGETS = ("gfx942", "gfx950", "sm_90a")  # what the CPU-side suites compile for


def cpu_suites(prefix: str, op: str, case: str, module: str,
               dtypes: Sequence[str] = ("fp16",),
               backends: Sequence[str] = ("tilelang", "triton"),
               targets: Sequence[str] = TARGETS) -> tuple[type, ...]:
    """The suites that need no GPU, for one representative case of an op.

    Returns ``<prefix>Registers, <prefix>Scratch, <prefix>SharedMem, <prefix>Occupancy,
    <prefix>CodeSize, <prefix>Compile``; assign them to those names in the bench module, so
    asv finds each under the name it was given.
    """
    params = (list(targets), list(dtypes), list(backends))
    made: list[type] = []
    for suffix, figure, unit in _FIGURES:
        made.append(type(f"{prefix}{suffix}", (_StaticFigure,), {
            "op": op, "case": case, "figure": figure, "unit": unit, "params": params,
            "__module__": module}))
    made.append(type(f"{prefix}CodeSize", (_Codegen,), {
        "op": op, "case": case, "params": params, "__module__": module}))
    made.append(type(f"{prefix}Compile", (_CompileTime,), {
        "op": op, "case": case, "params": params, "__module__": module}))
    return tuple(made)
