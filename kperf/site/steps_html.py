"""The history's steps on the head-to-head page: a short cause per case, a table per machine."""

from __future__ import annotations

from typing import Any

from kperf.site.pages import (
    commit_link,
    data_attr,
    esc,
)
from kperf.site.steps import Step

CAUSE_WORDS = {"code": "the code's own", "environment": "the environment's",
               "none": "no clock change", "unknown": "cause unknown"}


def step_short(step: Step) -> str:
    """The flagged series' own change: time per call, or energy per call."""
    if step.series.startswith(step.time_benchmark + "(") and step.time_ratio is not None:
        return f"x{step.time_ratio:.3f}"
    if step.energy_ratio is not None:
        return f"energy {100 * (step.energy_ratio - 1):+.1f}%"
    return f"x{step.asv_ratio:.3f}" if step.asv_ratio else "step"


def step_cell(step: Step | None) -> str:
    if step is None:
        return ('<td class="step"><span class="muted" title="asv flagged no step of this '
                'case on this machine">—</span></td>')
    return (f'<td class="step l" data-cause="{esc(step.cause)}"><a href="#step-{step.id}" '
            f'title="{esc(step.text)}">{esc(step_short(step))} @{esc(step.after.commit[:8])}'
            f'</a><br><span class="cause-{esc(step.cause)}">{CAUSE_WORDS[step.cause]}'
            "</span></td>")


def _side_cells(before: float | None, after: float | None, fmt: Any) -> str:
    return f"<td>{fmt(before)} → {fmt(after)}</td>"


def _mhz(x: float | None) -> str:
    return f"{x:.0f} MHz" if x else "—"


def _watts(x: float | None) -> str:
    return f"{x:.0f} W" if x else "—"


def _pct(ratio: float | None) -> str:
    return f"{100 * (ratio - 1):+.1f}%" if ratio is not None else "—"


def steps_table(name: str, steps: list[Step], commit_url: str) -> str:
    """The steps asv flagged on one machine, newest first, each with its cause."""
    mine = sorted((s for s in steps if s.machine == name), key=lambda s: -s.revision)
    if not mine:
        return ('<p class="muted steps-none">asv flagged no step of a timed or energy series '
                "on this machine.</p>")
    rows = []
    for s in mine:
        limit = s.before.power_limit_w or s.after.power_limit_w
        rows.append(
            f'<tr id="step-{s.id}" class="step" data-series="{esc(s.series)}" '
            f'data-cause="{esc(s.cause)}"><td class="l"><code>{esc(s.series)}</code></td>'
            f'<td class="l">{commit_link(s.before.commit, commit_url)} → '
            f"{commit_link(s.after.commit, commit_url)}</td>"
            f'<td{data_attr(s.threshold)}>'
            f'{f"{100 * s.threshold:g}%" if s.threshold is not None else "—"}</td>'
            f'<td class="time"{data_attr(s.time_ratio)}>'
            f'{f"x{s.time_ratio:.3f}" if s.time_ratio else "—"}</td>'
            f'<td class="energy"{data_attr(s.energy_ratio)}>{_pct(s.energy_ratio)}</td>'
            f"{_side_cells(s.before.sm_clock_mhz, s.after.sm_clock_mhz, _mhz)}"
            f"{_side_cells(s.before.power_w, s.after.power_w, _watts)}"
            f"<td>{_watts(limit)}</td>"
            f'<td class="l cause cause-{esc(s.cause)}">{esc(s.text)}<br>'
            f"<span class=why>{esc(s.why)}</span></td></tr>")
    return ('<table class="steps"><tr><th class="l">series</th><th class="l">commits</th>'
            "<th>threshold</th><th>time</th><th>energy / call</th><th>SM clock</th>"
            "<th>board power</th><th>limit</th><th class=l>cause</th></tr>"
            + "".join(rows) + "</table>")
