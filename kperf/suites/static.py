"""The static figures of a kernel compiled ahead of time for a target (no GPU needed), and
where the suites that need no GPU keep their records.

The figure suites (``_cpu_suites``) and the gate's workers (``_case.handle``, request
"static") read them through ``static_figures``; a compile suite's first timed compile
keeps its figures there too (``keep_static_figures``), so the figure suites compile
nothing more.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf.core import hip, record, static

from .digests import kernel_source_digest


def compile_record_root() -> Path:
    """Where the compile suites note what they timed: beside the measurement records, not
    among them (those are read as device-timed samples by the site and the gate)."""
    return record.record_root().parent / "compile-records"


def codegen_record_root() -> Path:
    """Where the code-size suites keep every static figure of a kernel (the codegen page
    reads them): beside the compile records, not among the device-timed records."""
    return record.record_root().parent / "codegen-records"


def _static_cache_path(key: dict[str, str]) -> Path:
    """Keyed by content, not commit: base and head of a PR that leaves an op alone share
    its compiles, and the gate's later rounds reuse the first round's. A gfx942 toolchain
    named in the key (``toolchain``) is keyed by its identity."""
    base = Path(os.environ.get("ASV_ENV_DIR", tempfile.gettempdir())) / "kperf-static"
    content = {**key, "source": kernel_source_digest(key["op"])}
    if key.get("toolchain"):
        content["toolchain"] = hip.toolchain(key["toolchain"], key["target"]).identity()
    return base / f"{record.params_key(content)}.json"


def static_figures(op_name: str, case: str, dtype: str, backend: str, target: str,
                   toolchain: str | None = None) -> dict:
    """Compile ahead of time for ``target`` (no GPU needed) and read the static figures;
    TileLang's gfx942 HIP source by the gfx942 ``toolchain`` named (default: the run's,
    ``kperf.core.hip.toolchain_name``).

    Cached per environment and kernel source: the figure suites share one compile per kernel.
    """
    key = {"op": op_name, "case": case, "dtype": dtype, "backend": backend, "target": target,
           **({"toolchain": toolchain} if toolchain else {})}
    path = _static_cache_path(key)
    if path.exists():
        return json.loads(path.read_text())
    be, case_def, tgt = _kernel(op_name, case, backend, target)
    artifacts = device_artifacts(be, case_def, dtype, tgt, toolchain)
    _PRIMED.add((target, backend, toolchain))  # this process has compiled for it now
    return keep_static_figures(key, artifacts, tgt.vendor)


def _kernel(op_name: str, case: str, backend: str, target: str) -> tuple[Any, Any, Any]:
    """(backend, case, target) of a kernel that can be compiled ahead of time."""
    from kperf.ops.registry import get_op
    from kperf.ops.targets import get_target

    op = get_op(op_name)
    be = op.backend(backend, case)
    if be.aot is None:
        raise NotImplementedError(f"{op_name}/{backend} has no ahead-of-time compile path")
    return be, op.case(case), get_target(target)


def device_artifacts(be: Any, case_def: Any, dtype: str, target: Any,
                     toolchain: str | None = None) -> dict[str, Any]:
    """A backend's ahead-of-time artifacts for a target down to a device binary: TileLang's
    gfx942 HIP source is compiled to a code object here, by the toolchain named (default:
    the run's; ``kperf.core.hip``), as hipcc would on a ROCm machine."""
    chain = hip.toolchain(toolchain, target.arch) if toolchain else None
    return hip.with_code_object(be.aot(case_def, dtype, target), target.vendor, target.arch,
                                chain)


@dataclass(frozen=True)
class Compiled:
    """A cold compile: its wall seconds, the CPU seconds it took (this process's threads and
    the compilers it ran: clang, ld.lld, nvcc and theirs), and what it made."""

    wall_s: float
    cpu_s: float
    artifacts: dict[str, Any]


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that ended (``getrusage``)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cold_compile(be: Any, case_def: Any, dtype: str, target: Any,
                 toolchain: str | None = None) -> Compiled:
    """A compile to a device binary with empty compiler caches. Both times are host
    timers on purpose: compiling is host work. The CPU seconds leave out what other
    processes do to the host meanwhile (docs/perf.md, "Compile time on a shared host")."""
    with tempfile.TemporaryDirectory(prefix="kperf-cold-") as cache:
        saved = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")}
        os.environ["TRITON_CACHE_DIR"] = os.environ["TILELANG_CACHE_DIR"] = cache
        try:
            cpu, start = _cpu_s(), time.perf_counter()
            artifacts = device_artifacts(be, case_def, dtype, target, toolchain)
            return Compiled(time.perf_counter() - start, _cpu_s() - cpu, artifacts)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# The compile suites' and the gate's primer: (op, case), a small kernel every target and
# backend builds.
PRIMER = ("rmsnorm", "llama3-8b.hidden")
# (target, backend, toolchain) this process has compiled for: its next compile for them
# is not its first (``compile_samples``)
_PRIMED: set[tuple[str, str, str | None]] = set()


def compile_samples(op_name: str, case: str, dtype: str, backend: str, target: str,
                    toolchain: str | None = None, repeat: int = 1,
                    primer: tuple[str, str] | None = PRIMER) -> dict[str, Any]:
    """``repeat`` cold compiles of one kernel in this process (the gate's compile blocks):
    ``{"samples": CPU seconds, "wall_s": seconds, "code_sha": of the last}``. The
    process's first compile for a target, backend and toolchain is paid untimed on
    ``primer`` (op, case), else on the kernel itself (``cpu._CompileTime._prime``
    says why)."""
    be, case_def, tgt = _kernel(op_name, case, backend, target)
    if (target, backend, toolchain) not in _PRIMED:
        try:
            p_be, p_case, _ = _kernel(*(primer or (op_name, case)), backend, target)
            cold_compile(p_be, p_case, "fp16" if primer else dtype, tgt, toolchain)
        except Exception:  # a primer this stack cannot build: the kernel primes
            cold_compile(be, case_def, dtype, tgt, toolchain)
        _PRIMED.add((target, backend, toolchain))
    compiles = [cold_compile(be, case_def, dtype, tgt, toolchain) for _ in range(repeat)]
    figures = keep_static_figures(
        {"op": op_name, "case": case, "dtype": dtype, "backend": backend, "target": target,
         **({"toolchain": toolchain} if toolchain else {})}, compiles[-1].artifacts,
        tgt.vendor)
    return {"samples": [c.cpu_s for c in compiles], "wall_s": [c.wall_s for c in compiles],
            "code_sha": figures["figures"].get("code_sha")}


def keep_static_figures(key: dict[str, str], artifacts: dict[str, Any],
                        vendor: str) -> dict[str, Any]:
    """The static figures of a compile's artifacts, kept where ``static_figures`` looks."""
    out = {"figures": static.figures(artifacts, vendor), "config": artifacts.get("config", {}),
           "artifacts": sorted(k for k in artifacts if k != "config")}
    record.atomic_write_json(_static_cache_path(key), out)
    return out


def codegen_request(request: dict[str, Any]) -> dict[str, Any]:
    """A gate worker's "static" (every figure) or "compile" (cold compiles) request."""
    spec = request["spec"]
    kernel = (spec["op"], spec["case"], spec["dtype"], spec["backend"], request["target"],
              request.get("toolchain"))
    if request["op"] == "static":
        return static_figures(*kernel)
    return compile_samples(*kernel, repeat=int(request.get("repeat", 1)))
