"""What every kperf page shares: the templates (kperf/site/templates/, escaped by
jinja2: every string that comes from results, records, reports, git or settings is
data, never markup), units that fit kernels, commit links and trend lines."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Sequence
from typing import Any

import jinja2
from markupsafe import Markup, escape

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("kperf.site", "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(template: str, globals: dict[str, Any] | None = None, /, **context: Any) -> str:
    """A page from its template; ``depth``: folders below html/ (kperf/ is 1);
    ``globals``: the page's own helpers, for its macros too."""
    context.setdefault("depth", 1)
    return _ENV.get_template(template, globals=globals).render(**context) + "\n"


def template_module(template: str, globals: dict[str, Any] | None = None) -> Any:
    """A template's macros, to call from Python."""
    return _ENV.get_template(template, globals=globals).module


def esc(value: Any) -> str:
    """As the templates escape (markupsafe), for the few fragments made in Python."""
    return str(escape("" if value is None else str(value)))


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


def data_attr(value: Any) -> Markup:
    """The exact figure behind a cell, for readers and tests (repr of a float)."""
    if value is None:
        return Markup("")
    if isinstance(value, float):
        return Markup(f' data-v="{value!r}"')
    return Markup(f' data-v="{esc(value)}"')


def commit_link(sha: str, commit_url: str, length: int = 8,
                subject: str | None = None) -> Markup:
    short = esc(sha[:length])
    title = f' title="{esc(subject)}"' if subject else ""
    if commit_url and re.fullmatch(r"[0-9a-f]{7,40}", sha or ""):
        return Markup(f'<a href="{esc(commit_url + sha)}"{title}><code>{short}</code></a>')
    return Markup(f"<code{title}>{short}</code>")


def sparkline(values: Sequence[float | None], width: int = 90, height: int = 22,
              title: str = "") -> Markup:
    """A small inline SVG of a series (gaps for missing points); lower is drawn lower."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if len(finite) < 2:
        return Markup('<span class="muted" title="fewer than two timed commits">—</span>')
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
    return Markup(f'<svg class="trend" width="{width}" height="{height}" '
                  f'data-values="{esc(vals)}"><title>{esc(title)}</title>{lines}{dots}</svg>')


_ENV.globals.update(fmt_time=fmt_time, fmt_energy=fmt_energy, fmt_num=fmt_num,
                    data_attr=data_attr, commit_link=commit_link, sparkline=sparkline)
