"""What the site shows, read from .asv without trusting it: asv's results, kperf's records,
kept gate reports, commit subjects and where commit links point.

Every reader is tolerant: a file that cannot be read, or that is not what it claims to
be, is skipped and reported in ``Notes`` (shown on the pages), never an exception that
would lose the site. Paths in notes are relative to the folder they were found in, so the
pages never carry the build machine's paths.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import statistics
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf import results

RECORD_SCHEMAS = {"kperf-record-1": 1, "kperf-record-2": 2}
GATE_SCHEMAS = ("kperf-gate-1", "kperf-gate-2")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar")
MAX_FILE_BYTES = 64 << 20  # a record or report larger than this is not one
TIME_PARAMS = ("case", "dtype", "backend")  # kperf/suites/timed.py:_TimeSuite.param_names


@dataclass
class Notes:
    """Warnings collected while reading; each is (where, what)."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.items.append((where, what))

    def __len__(self) -> int:
        return len(self.items)


# --------------------------------------------------------------------------- records


def _is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


def label_of(root: Path, path: Path) -> str:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.name
    return f"{root.name}/{rel}" if rel != "." else root.name


def _iter_record_texts(root: Path, notes: Notes) -> Iterator[tuple[str, bytes]]:
    """(label, bytes) of every record file under a root: loose *.json and the members
    of record archives (``kperf records pack``)."""
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in paths:
        if path.name.startswith("."):  # kperf/core/record.py's temporary files
            continue
        label = label_of(root.parent if root.is_file() else root, path)
        if _is_archive(path):
            yield from _iter_archive(path, label, notes)
        elif path.suffix == ".json":
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    notes.add(label, "larger than 64 MiB: not a record, skipped")
                    continue
                yield label, path.read_bytes()
            except OSError as err:
                notes.add(label, f"cannot be read ({err.strerror or err}): skipped")


def _iter_archive(path: Path, label: str, notes: Notes) -> Iterator[tuple[str, bytes]]:
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                name = member.name
                if not member.isfile() or not name.endswith(".json"):
                    continue
                if Path(name).name.startswith("."):
                    continue
                if member.size > MAX_FILE_BYTES:
                    notes.add(f"{label}:{name}", "larger than 64 MiB: skipped")
                    continue
                f = tar.extractfile(member)
                if f is not None:
                    yield f"{label}:{name}", f.read()
    except (tarfile.TarError, OSError, EOFError) as err:
        notes.add(label, f"record archive cannot be read ({err}): its records are skipped")


def parse_record(label: str, raw: bytes, notes: Notes) -> dict[str, Any] | None:
    """One record, or None (with a note) if it is not a readable kperf record."""
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        notes.add(label, f"not valid JSON ({err}): skipped")
        return None
    if not isinstance(rec, dict):
        notes.add(label, "not a JSON object: skipped")
        return None
    schema = rec.get("schema")
    if schema not in RECORD_SCHEMAS:
        if isinstance(schema, str) and schema.startswith("kperf-record-"):
            notes.add(label, f"schema {schema!r} is newer than this site knows "
                             f"({', '.join(RECORD_SCHEMAS)}); read for the fields it knows")
        else:
            notes.add(label, f"schema {schema!r} is not a kperf record: skipped")
            return None
    if not isinstance(rec.get("benchmark"), str) or not isinstance(rec.get("params"), dict):
        notes.add(label, "no benchmark name or params: skipped")
        return None
    if "measurement" in rec and not isinstance(rec["measurement"], dict):
        notes.add(label, "measurement is not an object: skipped")
        return None
    m = rec.get("measurement")
    if isinstance(m, dict) and not isinstance(m.get("windows", []), list):
        notes.add(label, "measurement.windows is not a list: skipped")
        return None
    rec["_source"] = label
    rec["_schema_version"] = RECORD_SCHEMAS.get(schema, max(RECORD_SCHEMAS.values()))
    return rec


def read_records(roots: Iterable[Path], notes: Notes) -> list[dict[str, Any]]:
    """Every readable record under the roots (folders or archives); the rest in notes."""
    out = []
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        for label, raw in _iter_record_texts(root, notes):
            rec = parse_record(label, raw, notes)
            if rec is not None:
                out.append(rec)
    return out


def params_text(params: dict[str, Any]) -> str:
    """The key a graph point and a record share: ``k=v;...`` sorted by name (also built by
    kperf/site/kperf-asv.js from asv's parameter values)."""
    return ";".join(f"{k}={v}" for k, v in sorted(params.items()))


def point_key(machine: str, commit: str, benchmark: str, params: dict[str, Any]) -> str:
    return f"{machine}|{commit}|{benchmark}|{params_text(params)}"


def point_id(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()[:12]


def record_key(rec: dict[str, Any]) -> str:
    return point_key(str(rec.get("machine") or ""), str(rec.get("commit") or ""),
                     rec["benchmark"], rec["params"])


def median_or_none(values: Sequence[float]) -> float | None:
    vals = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return statistics.median(vals) if vals else None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) \
        and math.isfinite(x) else None


def energy_state(rec: dict[str, Any]) -> str:
    """What a record says of its energy per call's conditions (kperf/core/timing.py's burst
    record; older records hold less): bursts and their spread, counter updates, the
    board's temperature and how long the GPU was idle before the case."""
    burst = (rec.get("measurement") or {}).get("energy_burst") or {}
    parts = []
    if _number(burst.get("bursts")) and burst["bursts"] > 1 and _number(burst.get("spread")):
        parts.append(f"{burst['bursts']} bursts {100 * burst['spread']:.1f}% apart")
    if _number(burst.get("counter_updates")) is not None:
        parts.append(f"{burst['counter_updates']} energy counter updates in "
                     f"{_number(burst.get('span_s')) or 0:.2f} s")
    for key, fmt in (("temperature_c_start", "{:.0f} °C at the start"),
                     ("temperature_c_before", "{:.0f} °C before the burst")):
        if _number(burst.get(key)) is not None:
            parts.append(fmt.format(burst[key]))
    if _number(rec.get("idle_before_s")) is not None:
        parts.append(f"GPU idle {rec['idle_before_s']:.1f} s before the case")
    return ", ".join(parts)


# --------------------------------------------------------------------------- asv results


@dataclass
class ResultFile:
    machine: str
    commit: str
    env_name: str
    date: int  # commit date, ms since the epoch (asv)
    label: str
    results: dict[str, dict[str, Any]]  # benchmark -> column name -> value
    # the machine's and environment's parameters, as asv names a graph's folders by them
    params: dict[str, Any] = field(default_factory=dict)


def _literal(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def read_results(results_dir: Path, notes: Notes
                 ) -> tuple[dict[str, dict[str, Any]], list[ResultFile], dict[str, Any]]:
    """(machines, result files, benchmarks.json) of an asv results folder."""
    machines: dict[str, dict[str, Any]] = {}
    files: list[ResultFile] = []
    benchmarks: dict[str, Any] = {}
    bj = results_dir / "benchmarks.json"
    if bj.exists():
        try:
            benchmarks = json.loads(bj.read_text())
            if not isinstance(benchmarks, dict):
                raise ValueError("not a JSON object")
        except (ValueError, OSError) as err:
            notes.add("results/benchmarks.json", f"cannot be read ({err})")
            benchmarks = {}
    for info, found in results.read_dir(results_dir, notes.add):
        machines[info["machine"]] = info
        label = f"results/{found.path.parent.name}/{found.path.name}"
        if not found.commit:
            notes.add(label, "cannot be read (it names no commit_hash): skipped")
            continue
        files.append(ResultFile(machine=info["machine"], commit=found.commit,
                                env_name=found.env_name, date=found.date, label=label,
                                results=found.rows, params=found.params))
    return machines, files, benchmarks


def param_names(benchmarks: dict[str, Any], bench: str, n: int) -> list[str]:
    names = (benchmarks.get(bench) or {}).get("param_names")
    if isinstance(names, list) and len(names) == n:
        return [str(x) for x in names]
    if bench.endswith(".track_time") and n == len(TIME_PARAMS):
        return list(TIME_PARAMS)
    return [f"param{i + 1}" for i in range(n)]


@dataclass
class Point:
    """One value of one benchmark at one commit on one machine, as asv stored it."""

    params: dict[str, Any]
    value: float | None  # None: failed; nan: skipped or not run
    q25: float | None = None
    q75: float | None = None
    n_samples: int | None = None

    @property
    def status(self) -> str:
        if self.value is None:
            return "failed"
        if isinstance(self.value, float) and math.isnan(self.value):
            return "skipped"
        return "ok"


def points_of(rf: ResultFile, bench: str, benchmarks: dict[str, Any]) -> list[Point]:
    row = rf.results.get(bench)
    if not row:
        return []
    cases = results.cases_of(bench, row)
    names = param_names(benchmarks, bench, len(row.get("params") or []))
    return [Point(params={n: _literal(v) for n, v in zip(names, c.params, strict=False)},
                  value=c.value, q25=c.q25, q75=c.q75,
                  n_samples=len(c.samples) if isinstance(c.samples, list) else None)
            for c in cases]


# --------------------------------------------------------------------------- gate reports


# --------------------------------------------------------------------------- git


