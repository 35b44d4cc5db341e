"""The codegen page's figures: per op and case, TileLang beside Triton for every target
and gfx942 toolchain, from the records the ``<Op>CodeSize`` and ``<Op>Compile`` suites
keep (kperf/suites/timed.py: ``.asv/codegen-records``, ``.asv/compile-records``).
kperf/site/codegen_page.py writes the page.

A column group is one target under one toolchain (gfx942: the toolchain that compiled
TileLang's HIP source, an asv environment each; sm_90a: none) at the latest commit with
its records. Compile time is the median of a cold compile's samples, from the latest
compile record at or before that commit (the suites time a compile only where it can have
changed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf.site import data

CODEGEN_DIR = "codegen-records"
COMPILE_DIR = "compile-records"
SUITE = re.compile(r"^(bench_\w+\.\w+?)(?:CodeSize\.track_value|Compile\.track_compile)$")
BACKENDS = ("tilelang", "triton")
COMPILE_ROW = "compile_s"
Record = dict[str, Any]


@dataclass(frozen=True)
class Group:
    """One column group: a target under one toolchain (None: the target has no choice)."""

    target: str
    toolchain: str | None

    @property
    def label(self) -> str:
        return f"{self.target} · {self.toolchain}" if self.toolchain else self.target

    @property
    def sort_key(self) -> tuple[bool, str, str]:
        chain = {"clang19": "0", "llvm19": "1"}.get(self.toolchain or "", f"2{self.toolchain}")
        return not self.target.startswith("gfx"), self.target, chain


@dataclass
class Cell:
    figures: dict[str, Any] | None  # None: no record
    why: str = ""
    compile_s: float | None = None
    compile_why: str = ""
    compile_at: str = ""  # the earlier commit that timed it


@dataclass
class OpTable:
    suite: str  # bench_<op>.<Prefix>
    op: str
    case: str
    dtype: str
    cells: dict[tuple[Group, str], Cell] = field(default_factory=dict)


@dataclass
class MachineView:
    machine: str
    commit: str
    groups: list[Group]
    group_commit: dict[Group, str]
    group_envs: dict[Group, list[str]]
    tables: list[OpTable]


def roots_beside(record_roots: list[Path]) -> list[Path]:
    """Where the suites keep them: beside each records folder (``.asv/records`` or
    ``KPERF_RECORD_DIR``, and ``<results>/records`` for those kept with the history)."""
    return list(dict.fromkeys(Path(root).parent / folder for root in record_roots
                              for folder in (CODEGEN_DIR, COMPILE_DIR)))


def _commit(rec: Record) -> str:
    return str(rec.get("commit"))


def _when(rec: Record) -> float:
    return float(rec.get("recorded_at") or 0.0)


def _usable(rec: Record, notes: data.Notes) -> bool:
    """A codegen record with its figures, or a compile record with its samples; another
    kind of record is not this page's (it is skipped without a note)."""
    kind = rec.get("kind")
    if kind not in ("codegen", "compile") or not SUITE.match(rec["benchmark"]):
        return False
    needed, needed_type = ("figures", dict) if kind == "codegen" else ("samples", list)
    if not isinstance(rec.get(needed), needed_type):
        notes.add(str(rec.get("_source")), f"a {kind} record without its {needed}: skipped")
        return False
    return True


def build(records: list[Record], revisions: dict[str, int],
          notes: data.Notes | None = None) -> list[MachineView]:
    """Per machine; ``revisions``: commit -> asv's revision number (else record times)."""
    mine = [r for r in records if _usable(r, notes if notes is not None else data.Notes())]
    machines = sorted({str(r.get("machine")) for r in mine if r["kind"] == "codegen"})
    return [_machine(m, [r for r in mine if str(r.get("machine")) == m], revisions)
            for m in machines]


def _machine(machine: str, records: list[Record], revisions: dict[str, int]) -> MachineView:
    latest: dict[str, float] = {}
    for r in records:
        latest[_commit(r)] = max(latest.get(_commit(r), 0.0), _when(r))
    rank = {c: (revisions.get(c, -1), t) for c, t in latest.items()}
    by_group: dict[Group, list[Record]] = {}
    for r in records:
        if r["kind"] == "codegen":
            chain = r.get("toolchain")
            by_group.setdefault(Group(str(r["params"].get("target")), chain and str(chain)),
                                []).append(r)
    groups = sorted(by_group, key=lambda g: g.sort_key)
    group_commit = {g: max({_commit(r) for r in by_group[g]}, key=rank.get) for g in groups}
    group_envs = {g: sorted({str(r.get("env_name")) for r in by_group[g]}) for g in groups}
    tables = _tables(by_group, group_commit)
    compiles = [r for r in records if r["kind"] == "compile"]
    for g in groups:
        timed = [r for r in compiles if str(r.get("env_name")) in group_envs[g]
                 and rank[_commit(r)] <= rank[group_commit[g]]]
        for table in tables:
            for backend in BACKENDS:
                cell = table.cells.setdefault((g, backend), Cell(None, (
                    f"no CodeSize record of {backend} on {g.label} at this commit: the suite "
                    "did not run, or the compile failed (the run's log says why)")))
                _compile_time(cell, _latest_compile(timed, table, g, backend, rank),
                              group_commit[g])
    commit = max(group_commit.values(), key=rank.get) if groups else ""
    return MachineView(machine, commit, groups, group_commit, group_envs, tables)


def _tables(by_group: dict[Group, list[Record]], group_commit: dict[Group, str]
            ) -> list[OpTable]:
    """One table per op suite and dtype, its cells from each group's commit (the latest
    record where a rerun left several)."""
    tables: dict[tuple[str, str], OpTable] = {}
    for g, records in by_group.items():
        for r in sorted(records, key=_when):
            if _commit(r) != group_commit[g]:
                continue
            suite, dtype = SUITE.match(r["benchmark"]).group(1), str(r["params"].get("dtype"))
            table = tables.setdefault((suite, dtype), OpTable(
                suite, str(r.get("op")), str(r.get("case")), dtype))
            table.cells[(g, str(r["params"].get("backend")))] = Cell(r.get("figures") or {})
    return sorted(tables.values(), key=lambda t: (t.op, t.case, t.dtype))


def _latest_compile(compiles: list[Record], table: OpTable, g: Group, backend: str,
                    rank: dict[str, tuple[int, float]]) -> Record | None:
    want = {"target": g.target, "dtype": table.dtype, "backend": backend}
    mine = [r for r in compiles if SUITE.match(r["benchmark"]).group(1) == table.suite
            and r["params"] == want]
    return max(mine, key=lambda r: (rank[_commit(r)], _when(r)), default=None)


def _compile_time(cell: Cell, rec: Record | None, commit: str) -> None:
    if rec is None:
        cell.compile_why = ("no compile record of this environment up to this commit: the "
                            "Compile suite did not run here, or it failed")
        return
    cell.compile_s = data.median_or_none(rec["samples"])
    cell.compile_why = "" if cell.compile_s is not None else "the compile record has no samples"
    cell.compile_at = _commit(rec) if _commit(rec) != commit else ""


def value(cell: Cell, key: str) -> Any:
    """A figure of a cell; an instruction kind absent from a read mix counts 0."""
    if key == COMPILE_ROW:
        return cell.compile_s
    figs = cell.figures or {}
    if key not in figs and key.startswith("isa.") and any(k.startswith("isa.") for k in figs):
        return 0
    return figs.get(key)


@dataclass
class Timing:
    """A machine's latest time per call of a codegen table's case, by backend: what the
    figures of one machine's code stand beside (a GPU runner's timings, the CPU codegen
    runner's figures)."""

    machine: str
    commit: str
    seconds: dict[str, float]  # backend -> median seconds per call


def timings_beside(files: list[data.ResultFile], benchmarks: dict[str, Any],
                   revisions: dict[str, int]) -> dict[tuple[str, str, str], list[Timing]]:
    """(suite ``bench_<op>.<Prefix>``, case, dtype) -> each machine's latest timing of it
    (``<Prefix>Time.track_time``), newest commit first per machine."""
    out: dict[tuple[str, str, str], dict[str, Timing]] = {}
    for rf in sorted(files, key=lambda f: revisions.get(f.commit, -1), reverse=True):
        for bench in rf.results:
            if not bench.endswith("Time.track_time"):
                continue
            suite = bench.removesuffix("Time.track_time")
            for point in data.points_of(rf, bench, benchmarks):
                params = point.params
                if point.status != "ok" or not {"case", "dtype", "backend"} <= set(params):
                    continue
                key = (suite, str(params["case"]), str(params["dtype"]))
                timing = out.setdefault(key, {}).setdefault(
                    rf.machine, Timing(rf.machine, rf.commit, {}))
                if timing.commit == rf.commit:
                    timing.seconds.setdefault(str(params["backend"]), float(point.value))
    return {k: sorted(v.values(), key=lambda t: t.machine) for k, v in out.items()}
