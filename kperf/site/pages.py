"""What every kperf page shares: escaping, units that fit kernels, the navigation bar,
the warnings box. Pages are static HTML written by Python: every string that comes from
results, records, reports, git or settings goes through ``esc``."""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

from kperf.site.data import Notes

CSS = """
body{font-family:"DejaVu Sans",sans-serif;margin:0 1.5em 2em;font-size:14px;color:#222}
nav.kperf{background:#f5f5f5;border-bottom:1px solid #ddd;margin:0 -1.5em 1em;
 padding:.6em 1.5em}
nav.kperf a{margin-right:1.2em;text-decoration:none;color:#2a6496}
nav.kperf a.here{font-weight:bold;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;font-size:13px;margin:.4em 0 1em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#eee}td.l,th.l{text-align:left}
.muted{color:#777}.why{color:#8a5a00;font-size:12px}
.fail{background:#ffd6d6}.skip{background:#f0f0f0;color:#666}.best{font-weight:bold}
.warn{background:#ffe0b3}.bad{background:#ffb3b3}
div.notes{background:#fff4e0;border:1px solid #f0c36d;padding:.5em 1em;margin:1em 0}
div.notes li{font-size:12px}
svg.trend{vertical-align:middle}
.verdict-SLOW{background:#ffb3b3}.verdict-FAST{background:#c8f0c8}
.verdict-INCONCLUSIVE{background:#ffe0b3}.verdict-SAME{background:#f4f4f4}
.cause-code{color:#a00000}.cause-environment{color:#8a5a00}
pre.md{background:#f8f8f8;border:1px solid #ddd;padding:1em;white-space:pre-wrap;
 font-size:12px}
"""

NAV = (("../index.html", "asv: benchmarks", "asv"),
       ("../index.html#/regressions", "regressions", "regressions"),
       ("head-to-head.html", "head to head", "h2h"),
       ("codegen.html", "codegen", "codegen"),
       ("telemetry.html", "clocks &amp; power per point", "telemetry"),
       ("gate/index.html", "gate reports", "gate"),
       ("index.html", "site status", "status"))


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, here: str, depth: int = 1, head: str = "") -> str:
    """A whole page; ``depth``: folders below html/ (kperf/ is 1, kperf/gate/ is 2)."""
    up = "../" * (depth - 1)
    links = " ".join(
        f'<a href="{up}{href}"{" class=here" if key == here else ""}>{text}</a>'
        for href, text, key in NAV)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(title)} · kperf</title><style>{CSS}</style>{head}</head><body>"
            f'<nav class="kperf">{links}</nav>\n{body}\n</body></html>\n')


def notes_box(notes: Notes, what: str = "files") -> str:
    if not len(notes):
        return ""
    items = "".join(f"<li><code>{esc(where)}</code>: {esc(text)}</li>"
                    for where, text in notes.items[:200])
    more = f"<li>... and {len(notes) - 200} more</li>" if len(notes) > 200 else ""
    return (f'<div class="notes" id="warnings"><b>{len(notes)} {esc(what)} skipped or only '
            f"partly read</b> (the rest of the site is built without them):<ul>{items}{more}"
            "</ul></div>")


def _sig(x: float, digits: int = 3) -> str:
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:.{decimals}f}"


def _scaled(x: float | None, units: Sequence[tuple[str, float]]) -> str:
    """``x`` in the largest unit it reaches (the last unit below that), 3 digits."""
    if x is None or not math.isfinite(x):
        return "—"
    for unit, scale in units[:-1]:
        if abs(x) >= scale:
            return f"{_sig(x / scale)} {unit}"
    unit, scale = units[-1]
    return f"{_sig(x / scale)} {unit}"


def fmt_time(seconds: float | None) -> str:
    """Kernel-sized units: s, ms, µs, ns with 3 significant digits."""
    return _scaled(seconds, (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)))


def fmt_energy(joules: float | None) -> str:
    return _scaled(joules, (("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6), ("nJ", 1e-9)))


def fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return _sig(x, digits) if abs(x) < 10 ** digits else f"{x:.0f}"


def data_attr(value: Any) -> str:
    """The exact figure behind a cell, for readers and tests (repr of a float)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f' data-v="{value!r}"'
    return f' data-v="{esc(value)}"'


def commit_link(sha: str, commit_url: str, length: int = 8, subject: str | None = None) -> str:
    short = esc(sha[:length])
    title = f' title="{esc(subject)}"' if subject else ""
    if commit_url and re.fullmatch(r"[0-9a-f]{7,40}", sha or ""):
        return f'<a href="{esc(commit_url + sha)}"{title}><code>{short}</code></a>'
    return f"<code{title}>{short}</code>"


def sparkline(values: Sequence[float | None], width: int = 90, height: int = 22,
              title: str = "") -> str:
    """A small inline SVG of a series (gaps for missing points); lower is drawn lower."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if len(finite) < 2:
        return '<span class="muted" title="fewer than two timed commits">—</span>'
    # at least 20% of the level top to bottom: noise of a few percent stays a flat line
    lo, hi = min(finite), max(finite)
    mid, span = (lo + hi) / 2, max(hi - lo, 0.2 * abs(statistics.fmean(finite))) or 1.0
    lo = mid - span / 2
    n = len(values)
    segments: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None or not math.isfinite(v):
            segments.append([])
            continue
        x = 2 + (width - 4) * (i / (n - 1) if n > 1 else 0.5)
        y = height - 2 - (height - 4) * (v - lo) / span
        segments[-1].append(f"{x:.1f},{y:.1f}")
    lines = "".join(f'<polyline fill="none" stroke="#2a6496" stroke-width="1.5" '
                    f'points="{" ".join(s)}"/>' for s in segments if len(s) > 1)
    dots = "".join(f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="1.5" '
                   f'fill="#2a6496"/>' for s in segments if len(s) == 1 for p in s)
    vals = json.dumps([v if v is not None and math.isfinite(v) else None for v in values])
    return (f'<svg class="trend" width="{width}" height="{height}" data-values="{esc(vals)}">'
            f"<title>{esc(title)}</title>{lines}{dots}</svg>")
