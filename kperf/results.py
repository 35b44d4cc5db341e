"""asv's results files (format 2), the one reader the gate, the site and the main job share.

A file of another format than asv 0.6's (``"version": 2``) is refused, as asv's own
``Results.load`` refuses it; a row becomes one ``CaseResult`` per
parameter combination, as asv expands them. Every failure is a ``ResultsFileError`` naming
the file.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ResultsFileError(Exception):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path


def case_name(benchmark: str, param_values: Sequence[str]) -> str:
    return f"{benchmark}({', '.join(param_values)})" if param_values else benchmark


@dataclass(frozen=True)
class CaseResult:
    """One parameter combination of one benchmark in one results file."""

    benchmark: str
    params: tuple[str, ...]  # asv's repr of each value, in the benchmark's order
    value: float | None  # None: failed; nan: skipped or not run
    samples: list[float] | None = None
    q25: float | None = None
    q75: float | None = None
    started_at_ms: float | None = None  # the benchmark's start (asv: per row)

    @property
    def name(self) -> str:
        return case_name(self.benchmark, self.params)

    @property
    def status(self) -> str:
        if self.value is None:
            return "failed"
        return "skipped" if isinstance(self.value, float) and math.isnan(self.value) else "ok"


def _column(row: dict[str, Any], name: str, i: int) -> Any:
    col = row.get(name)
    return col[i] if isinstance(col, list) and i < len(col) else None


def cases_of(benchmark: str, row: dict[str, Any]) -> list[CaseResult]:
    """A row (column name -> value) as asv stores it, one ``CaseResult`` per combination."""
    params = row.get("params") or []
    combos = list(itertools.product(*params)) if params else [()]
    values = row.get("result")
    values = values if isinstance(values, list) else [values] * len(combos)
    return [CaseResult(benchmark, tuple(str(p) for p in combo),
                       values[i] if i < len(values) else float("nan"),
                       samples=_column(row, "samples", i), q25=_column(row, "stats_q_25", i),
                       q75=_column(row, "stats_q_75", i), started_at_ms=row.get("started_at"))
            for i, combo in enumerate(combos)]


@dataclass
class ResultsFile:
    path: Path
    commit: str  # "" where the file names none
    env_name: str
    date: int  # commit date, ms since the epoch
    params: dict[str, Any]  # the machine's and environment's (asv's graph folders)
    env_vars: dict[str, Any] = field(default_factory=dict)  # the environment's env_nobuild
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # benchmark -> column -> value

    def cases(self) -> Iterator[CaseResult]:
        for benchmark, row in self.rows.items():
            yield from cases_of(benchmark, row)


FORMAT = 2  # asv.results.Results.api_version of the pinned asv


def load(path: Path) -> ResultsFile:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ResultsFileError(path, f"unreadable, truncated or corrupt ({err})") from err
    if not isinstance(data, dict) or data.get("version") != FORMAT:
        raise ResultsFileError(path, f"not an asv results file (format version {FORMAT})")
    try:
        columns, results = data["result_columns"], data["results"]
        rows = {bench: dict(zip(columns, row, strict=False)) for bench, row in results.items()}
        return ResultsFile(path, str(data.get("commit_hash") or ""),
                           str(data.get("env_name") or ""), int(data.get("date") or 0),
                           dict(data.get("params") or {}), dict(data.get("env_vars") or {}),
                           rows)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ResultsFileError(path, f"missing or malformed {err}") from err


def read_dir(results_dir: Path, skipped: Callable[[str, str], None]
             ) -> Iterator[tuple[dict[str, Any], ResultsFile]]:
    """(machine.json, file) of every results file under an asv results folder; a file or
    machine that cannot be read goes to ``skipped(path relative to the folder, why)``."""
    if not results_dir.is_dir():
        return
    for mdir in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        info = _machine_info(mdir, skipped)
        if info is None:
            continue
        for path in sorted(mdir.glob("*.json")):
            if path.name != "machine.json":
                try:
                    yield info, load(path)
                except ResultsFileError as err:
                    skipped(f"results/{mdir.name}/{path.name}",
                            f"cannot be read ({str(err).split(': ', 1)[1]}): skipped")


def _machine_info(mdir: Path, skipped: Callable[[str, str], None]) -> dict[str, Any] | None:
    path = mdir / "machine.json"
    if not path.exists():
        return None  # not a machine folder (e.g. kept records)
    try:
        info = json.loads(path.read_text())
        if not isinstance(info.get("machine"), str):
            raise ValueError("no machine name")
        return info
    except (ValueError, AttributeError, OSError) as err:
        skipped(f"results/{mdir.name}/machine.json", f"cannot be read ({err}): its results "
                                                     "are skipped")
        return None
