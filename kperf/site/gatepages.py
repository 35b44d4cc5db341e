"""Pages of the PR gate's kept reports (gate.json / gate.md, schema kperf-gate-1 or -2) and
of the thresholds it judges by. Reports are untrusted text: every field is escaped, and
gate.md is shown as text, not rendered."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

from kperf.site.data import Notes
from kperf.site.pages import commit_link, data_attr, esc, fmt_num, fmt_time, notes_box, page

STATUS_CLASS = {0: "verdict-SAME", 1: "verdict-SLOW", 2: "verdict-SLOW", 3: "verdict-INCONCLUSIVE"}


def _value(v: Any, unit: str) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        return "—"
    return fmt_time(v) if unit in ("seconds", "s") else f"{fmt_num(v, 4)} {esc(unit)}"


def _ci(ci: Any) -> str:
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(
            isinstance(x, int | float) for x in ci):
        return f"[{ci[0]:.4f}, {ci[1]:.4f}]"
    return "—"


def _when(rep: dict[str, Any]) -> str:
    return dt.datetime.fromtimestamp(rep["_mtime"], dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def report_page(rep: dict[str, Any], commit_url: str) -> str:
    cases = [c for c in rep.get("cases", []) if isinstance(c, dict)]
    rows = []
    for c in cases:
        verdict = str(c.get("verdict", ""))
        ratio = c.get("ratio")
        rows.append(
            f'<tr class="case"><td class="l">{esc(c.get("case"))}</td>'
            f'<td class="l">{esc(c.get("env"))}</td>'
            f'<td class="l verdict-{esc(verdict)}">{esc(verdict)}</td>'
            f'<td{data_attr(ratio if isinstance(ratio, float) else None)}>'
            f'{fmt_num(ratio, 4) if isinstance(ratio, int | float) else "—"}</td>'
            f"<td>{_ci(c.get('ci'))}</td>"
            f"<td>{_value(c.get('before'), str(c.get('unit', '')))}</td>"
            f"<td>{_value(c.get('after'), str(c.get('unit', '')))}</td>"
            f'<td class="l">{esc(c.get("reason"))}</td></tr>')
    table = ('<table class="gate-cases"><tr><th class="l">case</th><th class="l">env</th>'
             '<th class="l">verdict</th><th>ratio head/base</th><th>CI</th><th>base</th>'
             '<th>head</th><th class="l">reason</th></tr>' + "".join(rows) + "</table>"
             if rows else '<p class="why">This report holds no per-case verdicts'
             + (f": {esc(rep.get('error'))}" if rep.get("error") else "") + ".</p>")
    base, head = str(rep.get("base") or ""), str(rep.get("head") or "")
    code = rep.get("exit_code")
    body = (
        f'<p><a href="index.html">&larr; all gate reports</a></p>'
        f"<h1>Gate report {esc(rep.get('label') or '')}</h1>"
        f'<table class="gate-summary">'
        f'<tr><th class="l">status</th><td class="l {STATUS_CLASS.get(code, "")}">'
        f"{esc(rep.get('status'))} (exit {esc(code)})</td></tr>"
        f'<tr><th class="l">summary</th><td class="l">{esc(rep.get("summary") or rep.get("error"))}</td></tr>'  # noqa: E501
        f'<tr><th class="l">base</th><td class="l">'
        f'{commit_link(base, commit_url) if base else "—"} {esc(rep.get("base_how") or "")}</td></tr>'  # noqa: E501
        f'<tr><th class="l">head</th><td class="l">'
        f'{commit_link(head, commit_url) if head else "—"}</td></tr>'
        f'<tr><th class="l">machine</th><td class="l">{esc(rep.get("machine"))}</td></tr>'
        f'<tr><th class="l">report</th><td class="l"><code>{esc(rep["_source"])}</code>, '
        f"{esc(rep.get('schema'))}, written {_when(rep)}</td></tr></table>"
        f"<h2>Cases, worst first</h2>{table}"
        f"<h2>gate.md (the PR comment, as text)</h2>"
        + (f'<pre class="md">{esc(rep["_markdown"])}</pre>' if rep.get("_markdown") else
           '<p class="why">No gate.md was kept beside this gate.json.</p>'))
    return page(f"Gate report {rep.get('label') or rep['_id']}", body, "gate", depth=2)


def _thresholds(th: dict[str, Any] | None) -> str:
    if not th:
        return '<p class="why">No thresholds.json was found beside the site\'s sources.</p>'
    classes = th.get("classes") if isinstance(th.get("classes"), dict) else {}
    rows = "".join(
        f'<tr><td class="l">{esc(name)}</td><td>'
        f'{"exact" if c.get("exact") else esc(c.get("min_ratio"))}</td>'
        f'<td class="l">{esc(c.get("doc"))}</td></tr>'
        for name, c in classes.items() if isinstance(c, dict))
    rules = "".join(
        f'<tr><td class="l"><code>{esc(r.get("match"))}</code></td>'
        f'<td class="l">{esc(r.get("class"))}</td>'
        f'<td class="l">{"higher" if r.get("higher_is_better") else "lower"}</td></tr>'
        for r in th.get("rules", []) if isinstance(r, dict))
    settings = {k: th.get(k) for k in ("alpha", "beta", "correction", "clock_tolerance")
                if k in th}
    for group in ("sequential", "budget", "attribution"):  # kperf-thresholds-2
        settings.update({f"{group}.{k}": v for k, v in (th.get(group) or {}).items()
                         if k != "doc"})
    other = "".join(f'<tr><td class="l">{esc(k)}</td><td class="l">{esc(v)}</td></tr>'
                    for k, v in settings.items())
    return (f'<table class="thresholds"><tr><th class="l">class</th><th>smallest change '
            f'reported</th><th class="l">why</th></tr>{rows}</table>'
            f'<table><tr><th class="l">rule (first match gives the class)</th>'
            f'<th class="l">class</th><th class="l">better</th></tr>{rules}</table>'
            f'<table><tr><th class="l">setting</th><th class="l">value</th></tr>{other}</table>')


def write(out: Path, reports: list[dict[str, Any]], thresholds: dict[str, Any] | None,
          notes: Notes, commit_url: str) -> Path:
    """``out``/gate/index.html and one page per report; returns the index path."""
    gate_dir = out / "gate"
    gate_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for rep in reports:
        (gate_dir / f"{rep['_id']}.html").write_text(report_page(rep, commit_url))
        cases = [c for c in rep.get("cases", []) if isinstance(c, dict)]
        counts = {}
        for c in cases:
            counts[str(c.get("verdict"))] = counts.get(str(c.get("verdict")), 0) + 1
        code = rep.get("exit_code")
        name = esc(rep.get("label") or rep["_id"])
        rows.append(
            f'<tr><td class="l"><a href="{esc(rep["_id"])}.html">{name}'
            f'</a></td><td class="l {STATUS_CLASS.get(code, "")}">{esc(rep.get("status"))}</td>'
            f'<td class="l">{esc(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))}</td>'
            f'<td class="l">{commit_link(str(rep.get("base") or ""), commit_url)} &rarr; '
            f'{commit_link(str(rep.get("head") or ""), commit_url)}</td>'
            f'<td class="l">{esc(rep.get("machine"))}</td><td class="l">{_when(rep)}</td></tr>')
    listing = (
        '<table class="gate-reports"><tr><th class="l">report</th><th class="l">status</th>'
        '<th class="l">verdicts</th><th class="l">base &rarr; head</th><th class="l">machine'
        f'</th><th class="l">written</th></tr>{"".join(rows)}</table>' if rows else
        '<p class="why" id="no-reports">No gate report is kept in this history. The gate '
        "(<code>kperf gate</code>) writes gate.md and gate.json into its "
        "<code>--out</code> folder (default <code>.asv/pr-results</code>); keep one for the "
        "site with <code>kperf publish --keep-gate DIR</code>, which copies it "
        "into <code>.asv/gate-reports/</code>.</p>")
    body = (f"<h1>PR gate reports</h1>{notes_box(notes, 'reports')}{listing}"
            "<h2>Thresholds the gate judges by (thresholds.json)</h2>"
            f"{_thresholds(thresholds)}")
    index = gate_dir / "index.html"
    index.write_text(page("Gate reports", body, "gate", depth=2))
    return index
