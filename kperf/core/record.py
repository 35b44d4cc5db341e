"""Per-sample records (telemetry, timing mode, chosen config) stored next to asv's results.

asv keeps only samples and statistics. Everything else a measurement knows is written
here, keyed like asv's results (machine / commit / environment / benchmark / params),
one small JSON file per benchmark process, written atomically so that an interrupted run
leaves either the old file or the new one, never half a file. asv runs a benchmark once
per round (``rounds``) and pools the rounds' samples: each round's process writes a file
of its own, and a reader matches them to asv's pooled samples.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, TypedDict

# 2 (2026-12-01) added energy_per_call_j and, per window, power_limit_w and an energy_j
# read off the counter's ends; readers take 1 and 2 (kperf/gate/asvio.py, kperf/site).
RECORD_SCHEMA = "kperf-record-2"
# One folder name: no '/', no '..' (kperf/paths.py's SAFE_NAME, copied: harness never
# imports tools). A machine called '../../x' would write records outside the root.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


class Record(TypedDict, total=False):
    """One record as written (kperf/schemas/record.json checks it where it is read; a test
    keeps the two in step). Readers add ``_source`` and ``_schema_version``."""

    schema: str  # RECORD_SCHEMA
    benchmark: str  # asv's name of the suite's method
    params: dict[str, Any]
    machine: str
    commit: str | None
    env_name: str | None
    kperf: str  # ``instrument()``
    kind: Literal["time", "codegen", "compile"]
    recorded_at: float
    # kind "time": a measurement and what it means (kperf/suites/timed.py)
    plan: dict[str, Any]  # the plan's fields that differ from the defaults
    baseline_key: str
    kernel_key: str
    measurement: dict[str, Any]  # ``Measurement.as_record()``: samples, windows, modes
    config: dict[str, Any]  # the kernel's tile configuration
    target: str
    gpu: str | None
    first_call_s: float | None
    tflops: float | None
    gbps: float | None
    max_abs_err: float | None
    energy_per_call_j: float | None
    pid: int
    idle_before_s: float | None
    # kind "codegen": every static figure of the kernel's code (kperf/suites/cpu.py)
    op: str
    case: str
    toolchain: str | None
    figures: dict[str, Any]
    # kind "compile": cold compiles' CPU seconds and wall seconds
    compile_key: str
    samples: list[float]
    wall_s: list[float]


def record_root() -> Path:
    """``KPERF_RECORD_DIR``, else ``<asv conf dir>/.asv/records``."""
    explicit = os.environ.get("KPERF_RECORD_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("ASV_CONF_DIR", ".")) / ".asv" / "records"


def params_key(params: dict[str, Any]) -> str:
    text = json.dumps(params, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine_name() -> str:
    machine = os.environ.get("KPERF_MACHINE", "unknown-machine")
    if not SAFE_NAME.fullmatch(machine):
        raise ValueError(f"KPERF_MACHINE={machine!r}: a machine name must be one plain folder "
                         f"name (letters, digits, . _ + -), not a path")
    return machine


def commit_id() -> str | None:
    """The commit asv measures: ``ASV_COMMIT``, else the commit installed in the asv
    environment (``ASV_ENV_DIR/asv-install-status.json``). asv builds one environment for
    the variants of an ``env_nobuild`` matrix (a gfx942 toolchain each) and, in a fresh run,
    sets ASV_COMMIT for the first variant only: the others' records said "nocommit" (the
    CPU machine, 2026-12-06, docs/journal/2026-12-06.md)."""
    commit = os.environ.get("ASV_COMMIT")
    if commit or not os.environ.get("ASV_ENV_DIR"):
        return commit or None
    try:
        status = json.loads((Path(os.environ["ASV_ENV_DIR"]) / "asv-install-status.json")
                            .read_text())
    except (OSError, ValueError):
        return None
    found = status.get("commit_hash") if isinstance(status, dict) else None
    return found if isinstance(found, str) and re.fullmatch(r"[0-9a-f]{7,64}", found) else None


def record_path(benchmark: str, params: dict[str, Any], root: Path | None = None) -> Path:
    machine = machine_name()
    commit = (commit_id() or "nocommit")[:8]
    env = os.environ.get("ASV_ENV_NAME", "noenv")
    base = (root or record_root()) / machine / f"{commit}-{env}" / benchmark
    # one file per process: a later round must not overwrite an earlier one's record
    return base / f"{params_key(params)}.{time.time_ns()}.{os.getpid()}.json"


def atomic_write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@functools.cache
def instrument() -> str:
    """The kperf that measured: its version and a digest of its code (every .py file of
    the package), the same for every commit of a run and recorded with each result."""
    from kperf import __version__

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return f"kperf {__version__} {digest.hexdigest()[:12]}"


def write_record(benchmark: str, params: dict[str, Any], payload: Record,
                 root: Path | None = None) -> Path:
    path = record_path(benchmark, params, root)
    atomic_write_json(path, {
        "schema": RECORD_SCHEMA,
        "benchmark": benchmark,
        "params": params,
        "machine": machine_name(),
        "commit": commit_id(),
        "env_name": os.environ.get("ASV_ENV_NAME"),
        "kperf": instrument(),
        **payload,
    })
    return path


def machine_records(benchmark: str, params: dict[str, Any],
                    root: Path | None = None) -> list[Record]:
    """This machine's records of one benchmark and params, at every commit and environment,
    oldest first. A file that cannot be read is named on stderr and passed over: the
    caller then measures, which is never wrong."""
    out = []
    base = (root or record_root()) / machine_name()
    for path in base.glob(f"*/{benchmark}/{params_key(params)}.*.json"):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as err:
            print(f"kperf: record {path} is unreadable ({err}); not used", file=sys.stderr)
    return sorted(out, key=lambda r: float(r.get("recorded_at") or 0.0))


def read_records(root: Path | None = None) -> list[Record]:
    """Every record under the root; a corrupt file is reported by path, not skipped silently."""
    out = []
    for path in sorted((root or record_root()).rglob("*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from err
    return out
