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
import tempfile
from pathlib import Path
from typing import Any

from harness import hip, record, static

from ._digests import kernel_source_digest


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
    its compiles, and the gate's later rounds reuse the first round's."""
    base = Path(os.environ.get("ASV_ENV_DIR", tempfile.gettempdir())) / "kperf-static"
    name = record.params_key({**key, "source": kernel_source_digest(key["op"])})
    return base / f"{name}.json"


def static_figures(op_name: str, case: str, dtype: str, backend: str, target: str) -> dict:
    """Compile ahead of time for ``target`` (no GPU needed) and read the static figures.

    Cached per environment and kernel source: the figure suites share one compile per kernel.
    """
    key = {"op": op_name, "case": case, "dtype": dtype, "backend": backend, "target": target}
    path = _static_cache_path(key)
    if path.exists():
        return json.loads(path.read_text())
    from kernels.registry import get_op
    from kernels.targets import get_target

    op = get_op(op_name)
    be = op.backend(backend, case)
    if be.aot is None:
        raise NotImplementedError(f"{op_name}/{backend} has no ahead-of-time compile path")
    tgt = get_target(target)
    return keep_static_figures(key, device_artifacts(be, op.case(case), dtype, tgt), tgt.vendor)


def device_artifacts(be: Any, case_def: Any, dtype: str, target: Any) -> dict[str, Any]:
    """A backend's ahead-of-time artifacts for a target down to a device binary: TileLang's
    gfx942 HIP source is compiled to a code object here, by the toolchain the run names
    (``harness.hip``), as hipcc would on a ROCm machine."""
    return hip.with_code_object(be.aot(case_def, dtype, target), target.vendor, target.arch)


def keep_static_figures(key: dict[str, str], artifacts: dict[str, Any],
                        vendor: str) -> dict[str, Any]:
    """The static figures of a compile's artifacts, kept where ``static_figures`` looks."""
    out = {"figures": static.figures(artifacts, vendor), "config": artifacts.get("config", {}),
           "artifacts": sorted(k for k in artifacts if k != "config")}
    record.atomic_write_json(_static_cache_path(key), out)
    return out
