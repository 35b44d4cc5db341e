"""The codegen page's figures: per op and case, TileLang beside Triton for every target
and gfx942 toolchain, from the records the ``<Op>CodeSize`` and ``<Op>Compile`` suites
keep (kperf/suites/timed.py: ``.asv/codegen-records``, ``.asv/compile-records``).
``write`` makes the page, each summary line computed from the figures shown, never written
by hand.

A column group is one target under one toolchain (gfx942: the toolchain that compiled
TileLang's HIP source, an asv environment each; sm_90a: none) at the latest commit with
its records. Compile time is the median of a cold compile's samples, from the latest
compile record at or before that commit (the suites time a compile only where it can have
changed).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kperf.site import data, repo_data
from kperf.site.pages import esc, fmt_num
from kperf.site.pages import render as render_template

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


# --------------------------------------------------------------------------- the page
NAMES = {"tilelang": "TileLang", "triton": "Triton"}
FIGURES = (("registers", "VGPRs, total (sm_90a: registers per thread)"),
           ("agprs", "of them AGPRs"), ("sgprs", "SGPRs"), ("vgpr_spills", "VGPR spills"),
           ("sgpr_spills", "SGPR spills"), ("scratch_bytes", "scratch bytes"),
           ("lds_static_bytes", "LDS static bytes"),
           ("shared_bytes", "LDS / shared bytes, static + dynamic"),
           ("occupancy", "occupancy: waves per SIMD (sm_90a: warps per scheduler), limit"),
           ("threads", "threads per block"), ("code_bytes", "code bytes"),
           (COMPILE_ROW, "compile time, cold, to a device binary"),
           ("isa.matrix", "matrix-core instructions (MFMA; sm_90a: HGMMA, HMMA)"))
ACCESSES = (("global_load", "global loads", ("32", "64", "96", "128")),
            ("global_store", "global stores", ("32", "64", "96", "128")),
            ("lds_read", "LDS reads", ("16", "32", "64", "128")),
            ("lds_write", "LDS writes", ("16", "32", "64", "128")))
LAST_ROWS = (("isa.tma_load", "TMA loads"), ("isa.tma_store", "TMA stores"),
             ("isa.wait", "waits (s_waitcnt; sm_90a: DEPBAR, ...)"),
             ("isa.barrier", "barriers (s_barrier; sm_90a: BAR)"),
             ("isa.instructions", "instructions, all"),
             ("occupancy_llvm", "occupancy by LLVM's count (static LDS only)"),
             ("static_shared_bytes", "static shared bytes (sm_90a)"),
             ("source_bytes", "device source bytes (TileLang)"))

def _widths(figs: dict[str, Any], kind: str) -> Counter[str]:
    return Counter({k.rsplit(".", 1)[1]: int(v) for k, v in figs.items()
                    if k.startswith(f"isa.{kind}.") and isinstance(v, int | float)})


def _dominant(figs: dict[str, Any], kind: str) -> str:
    """``16-bit 32 of 36``: the width most of an access kind's instructions have."""
    widths = _widths(figs, kind)
    if not widths:
        return "none"
    bits, count = widths.most_common(1)[0]
    return f"{bits}-bit {count} of {sum(widths.values())}"


def _pair(table: OpTable, g: Group) -> tuple[Cell, Cell]:
    return table.cells[(g, "tilelang")], table.cells[(g, "triton")]


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) else fmt_num(v) if isinstance(v, float) else str(v)


def _occupancy(cell: Cell) -> str:
    figs = cell.figures or {}
    return f"{_num(figs.get('occupancy'))} ({figs.get('occupancy_limit', '?')})"


def op_summary(table: OpTable, groups: list[Group]) -> list[str]:
    gfx = [g for g in groups if g.target.startswith("gfx")]
    lines = []
    for g in gfx[:1]:
        tl, tr = _pair(table, g)
        if tl.figures and tr.figures:
            lines += [f"{what} ({g.label}), the most at one width: TileLang "
                      f"{_dominant(tl.figures, kind)}; Triton {_dominant(tr.figures, kind)}"
                      for kind, what in (("lds_read", "LDS reads"), ("lds_write", "LDS writes"),
                                         ("global_load", "global loads"))]
            lines.append(f"occupancy ({g.label}): TileLang {_occupancy(tl)}, Triton "
                         f"{_occupancy(tr)}; matrix-core instructions: TileLang "
                         f"{value(tl, 'isa.matrix')}, Triton {value(tr, 'isa.matrix')}")
    for g in groups:
        tl, tr = _pair(table, g)
        if tl.compile_s is not None and tr.compile_s is not None:
            binary = "a code object" if g.target.startswith("gfx") else "a cubin"
            lines.append(f"compile ({g.label}): TileLang {fmt_num(tl.compile_s, 2)} s vs "
                         f"Triton {fmt_num(tr.compile_s, 2)} s to {binary}")
    tilelang = [(g.toolchain, f) for g in gfx if (f := table.cells[(g, "tilelang")].figures)]
    if len(tilelang) > 1:
        lines.append("TileLang by toolchain: " + "; ".join(
            f"{chain} {_num(f.get('registers'))} VGPRs, occupancy {_num(f.get('occupancy'))}"
            for chain, f in tilelang))
    return lines


def claims(tables: list[OpTable], groups: list[Group]) -> list[str]:
    """What the figures say of the claims that TileLang compiles faster on ROCm and uses
    LDS and wide loads better: per gfx942 toolchain, over every op of the page."""
    lines = []
    for g in (g for g in groups if g.target.startswith("gfx")):
        pairs = [_pair(t, g) for t in tables]
        timed = [(tl.compile_s, tr.compile_s) for tl, tr in pairs
                 if tl.compile_s is not None and tr.compile_s is not None]
        if timed:
            lines.append(f"{g.label}: TileLang compiled to a code object faster than Triton in "
                         f"{sum(a < b for a, b in timed)} of {len(timed)} ops (median time "
                         f"ratio TileLang/Triton {statistics.median(a / b for a, b in timed):.2f})")
        for kind, what in (("lds_read", "LDS reads"), ("lds_write", "LDS writes"),
                           ("global_load", "global loads")):
            tl, tr = (_wide_share([c.figures for c in side if c.figures], kind)
                      for side in zip(*pairs, strict=True)) if pairs else ("none", "none")
            lines.append(f"{g.label}: {what} that are 128-bit, static counts over all ops: "
                         f"TileLang {tl}; Triton {tr}")
    return lines


def _wide_share(all_figs: list[dict[str, Any]], kind: str) -> str:
    total: Counter[str] = Counter()
    for figs in all_figs:
        total.update(_widths(figs, kind))
    n = sum(total.values())
    return f"{total['128']} of {n} ({100 * total['128'] / n:.0f}%)" if n else "none"


# --------------------------------------------------------------------------- the page


def _rows(table: OpTable) -> list[tuple[str, str]]:
    """The figures, then every usual width of each access and any other width or figure
    a record holds."""
    figs = [c.figures for c in table.cells.values() if c.figures]
    rows = list(FIGURES)
    for kind, what, usual in ACCESSES:
        seen = {k.rsplit(".", 1)[1] for f in figs for k in f if k.startswith(f"isa.{kind}.")}
        for w in sorted(set(usual) | seen, key=lambda w: (not w.isdigit(), w.zfill(4))):
            rows.append((f"isa.{kind}.{w}", f"{what}, {w}{'-bit' if w.isdigit() else ''}"))
    rows += LAST_ROWS
    shown = {k for k, _ in rows} | {"occupancy_limit"}
    return rows + [(k, k) for k in sorted({k for f in figs for k in f} - shown)]


def _why(cell: Cell, key: str) -> str:
    if key == COMPILE_ROW:
        return cell.compile_why
    if cell.why:
        return cell.why
    if key.startswith("isa."):
        return "no instruction mix in this record: this target's binary is not disassembled"
    return "not among this record's figures: this target's binary does not give it"


def _text(cell: Cell, key: str, v: Any) -> Markup:
    if key == COMPILE_ROW:
        at = cell.compile_at[:8]
        return Markup(fmt_num(v) + " s" + (f' <span class="muted" title="timed at that commit, '
                                            f'unchanged since">@{esc(at)}</span>' if at else ""))
    text = esc(_num(v))
    limit = (cell.figures or {}).get("occupancy_limit")
    if key == "occupancy" and limit:
        text += f' <span class="muted">{esc(limit)}</span>'
    return Markup(text)


def _table_rows(table: OpTable, view: MachineView) -> list[tuple[str, str, list[Any]]]:
    """Per figure: (key, label, per group and backend (group, backend, value, text, why))."""
    rows = []
    for key, label in _rows(table):
        cells = []
        for g in view.groups:
            for b in BACKENDS:
                cell = table.cells[(g, b)]
                v = value(cell, key)
                cells.append((g, b, v, None if v is None else _text(cell, key, v),
                              _why(cell, key)))
        rows.append((key, label, cells))
    return rows


def _timings(table: OpTable, timings: dict[tuple[str, str, str], list[Timing]]
             ) -> list[dict[str, str]]:
    """Each machine's latest time per call of the table's case, beside its code's figures
    (a GPU runner's timings by the CPU codegen runner's figures)."""
    return [{"machine": t.machine, "commit": t.commit, "text": ", ".join(
        f"{NAMES.get(b, b)} {fmt_num(s * 1e6, 4)} µs" for b, s in sorted(t.seconds.items()))}
        for t in timings.get((table.suite, table.case, table.dtype)) or []]


def _machine_context(v: MachineView, subjects: dict[str, dict[str, Any]],
             timings: dict[tuple[str, str, str], list[Timing]]) -> dict[str, Any]:
    return {"view": v, "subject": subjects.get(v.commit, {}).get("subject"),
            "claims": claims(v.tables, v.groups),
            "tables": [{"table": t, "summary": op_summary(t, v.groups),
                        "timings": _timings(t, timings), "rows": _table_rows(t, v)}
                       for t in v.tables]}


def render(views: list[MachineView], notes: data.Notes, commit_url: str,
           subjects: dict[str, dict[str, Any]],
           timings: dict[tuple[str, str, str], list[Timing]] | None = None) -> str:
    return render_template("codegen.html", title="Codegen", here="codegen", notes=notes,
                           commit_url=commit_url, backends=BACKENDS, names=NAMES,
                           machines=[_machine_context(v, subjects, timings or {}) for v in views])


def write(kperf: Path, roots: list[Path], revisions: dict[str, int], commit_url: str,
          git_repo: Path,
          timings: dict[tuple[str, str, str], list[Timing]] | None = None) -> data.Notes:
    """kperf/codegen.html; returns the files it skipped. ``timings``: each machine's time
    per call of the tables' cases (``codegen.timings_beside``)."""
    notes = data.Notes()
    records = data.read_records(roots, notes)
    views = build(records, revisions, notes)
    subjects = repo_data.commit_subjects(git_repo, {v.commit for v in views})
    (kperf / "codegen.html").write_text(render(views, notes, commit_url, subjects, timings))
    return notes
