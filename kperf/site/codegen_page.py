"""kperf/codegen.html: per op and case, TileLang beside Triton for every target and gfx942
toolchain (kperf/site/codegen.py reads the records), with a summary per op and for the
page, each line computed from the figures shown, never written by hand.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kperf.site import data, repo_data
from kperf.site.codegen import (
    BACKENDS,
    COMPILE_ROW,
    Cell,
    Group,
    MachineView,
    OpTable,
    Timing,
    build,
    value,
)
from kperf.site.pages import esc, fmt_num
from kperf.site.pages import render as render_template

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


def _machine(v: MachineView, subjects: dict[str, dict[str, Any]],
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
                           machines=[_machine(v, subjects, timings or {}) for v in views])


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
