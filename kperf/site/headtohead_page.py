"""kperf/head-to-head.html: per machine its roofs and the steps asv flagged with their
causes, then per op and case every backend's row (kperf/site/headtohead.py gathers the
figures and says where each comes from).
"""

from __future__ import annotations

from typing import Any

from kperf.site import data
from kperf.site.headtohead import (
    BASELINE,
    TREND_COMMITS,
    Cell,
    MachineView,
    OpTable,
    hold_effect,
)
from kperf.site.pages import (
    commit_link,
    data_attr,
    esc,
    fmt_energy,
    fmt_num,
    fmt_time,
    notes_box,
    page,
    sparkline,
)
from kperf.site.steps import Step, latest_by_point
from kperf.site.steps_html import step_cell, steps_table


def energy_title(c: Cell, threshold: float | None) -> str:
    flag = (f"the history flags a step of this energy series beyond {100 * threshold:g}% "
            "(asv.conf.json: its class's run-to-run spread, docs/site.md)"
            if threshold is not None else "")
    return ". ".join(p for p in (flag, c.energy_state) if p)


def _why(text: str) -> str:
    return f'<span class="muted" title="{esc(text)}">—</span>' if text else "—"


def _hold_effect_text(c: Cell) -> str:
    """What this series' own trend says of the hold: its held commits' median time against
    its unheld commits' (kperf/site/headtohead.py ``hold_effect``)."""
    effect = hold_effect(c)
    if effect is None:
        return ("Its trend on this machine has no held and unheld commits both, so no "
                "figure of how far the hold moves its time")
    ratio, held, unheld = effect
    way = "slower" if ratio > 0 else "faster"
    return (f"Over its last {len(c.trend)} commits on this machine (the trend), its "
            f"{held} held commit(s) read {100 * abs(ratio):.1f}% {way} than its {unheld} "
            "unheld one(s) (medians; the kernel may differ between commits)")


def held_mark(c: Cell) -> str:
    """A mark beside the time of a point whose reps waited behind a hold (its host fell
    behind the GPU); empty where they did not or it is not recorded."""
    if not c.rep_hold_s:
        return ""
    title = (f"its host fell behind the GPU, so each timed rep waited behind a "
             f"{c.rep_hold_s * 1e6:.0f} µs hold (kperf/core/reps.py); a kernel's time moves with "
             f"such a hold. {_hold_effect_text(c)}")
    if c.regimes_differ:
        title += ". Another backend of this case ran without one: the two times are not " \
                 "from one regime"
    cls = "why" if c.regimes_differ else "muted"
    return f' <span class="{cls} held" title="{esc(title)}">held</span>'


def _cell_row(c: Cell, energy_threshold: float | None = None) -> str:
    link = (f'<a href="telemetry.html#point={c.point_id}" title="clocks, power and '
            f'throttle state of this point\'s samples">telemetry</a>' if c.n_records else
            '<span class="muted" title="no record of this point">—</span>')
    trend = sparkline(c.trend, title=f"{c.backend}: time per call over the last "
                                     f"{len(c.trend)} commits (lower is faster)")
    if c.status != "ok":
        cls = "fail" if c.status == "failed" else "skip"
        return (f'<td class="l {cls}" data-status="{c.status}">{esc(c.backend)}</td>'
                f'<td class="l {cls}" colspan="7" data-status="{c.status}"><b>{c.status}</b>'
                f' <span class="why">{esc(c.reason)}</span></td><td>{trend}</td>'
                f"<td>{link}</td>")
    roof = (f"{c.roof_frac * 100:.0f}% <span class=muted>{esc(c.roof_kind)}</span>"
            if c.roof_frac is not None else _why(c.roof_why))
    if c.vs_torch is not None and c.vs_torch_why:
        vs = f'<span title="{esc(c.vs_torch_why)}">{c.vs_torch:.2f}×*</span>'
    elif c.vs_torch is not None:
        vs = f"{c.vs_torch:.2f}×"
    elif c.backend == BASELINE:
        vs = '<span class="muted">baseline</span>'
    else:
        vs = _why(c.vs_torch_why)
    no_rec = "no record of this point was published"
    label = esc(c.backend)
    if c.timed_at:
        label += (f' <span class="muted" title="not timed at this commit (what its timing '
                  f'depends on was unchanged, or the run did not select it): as timed at '
                  f'{esc(c.timed_at[:8])}">@{esc(c.timed_at[:8])}</span>')
    return (f'<td class="l" data-status="ok" data-timed-at="{esc(c.timed_at)}">{label}</td>'
            f'<td class="time"{data_attr(c.time_s)}>{fmt_time(c.time_s)}{held_mark(c)}</td>'
            f'<td class="tflops"{data_attr(c.tflops)}>'
            f'{fmt_num(c.tflops) if c.tflops is not None else _why(no_rec)}</td>'
            f'<td class="gbps"{data_attr(c.gbps)}>'
            f'{fmt_num(c.gbps, 4) if c.gbps is not None else _why(no_rec)}</td>'
            f'<td class="roof"{data_attr(c.roof_frac)}>{roof}</td>'
            f'<td class="vs"{data_attr(c.vs_torch)}>{vs}</td>'
            f'<td class="energy"{data_attr(c.energy_j)} title="'
            f'{esc(energy_title(c, energy_threshold))}">'
            f'{fmt_energy(c.energy_j) if c.energy_j is not None else _why(c.energy_why)}</td>'
            f'<td class="clock"{data_attr(c.sm_mhz)}>'
            f'{fmt_num(c.sm_mhz, 4) if c.sm_mhz is not None else _why(no_rec if not c.n_records else "no clock reading")}</td>'  # noqa: E501
            f"<td>{trend}</td><td>{link}</td>")


HEAD = ('<tr><th class="l">case</th><th class="l">dtype</th><th class="l">backend</th>'
        "<th>time / call</th><th>TFLOP/s</th><th>GB/s</th><th>% of roofline</th>"
        "<th>vs torch</th><th>energy / call</th><th>SM MHz</th><th>trend</th>"
        "<th>clocks</th><th>last step</th></tr>")


def _energy_threshold(thresholds: dict[str, float] | None, time_benchmark: str,
                      params: tuple[str, ...]) -> float | None:
    from kperf.gate.asvio import asv_threshold

    if not isinstance(thresholds, dict) or not thresholds:
        return None
    energy = time_benchmark.replace("Time.track_time", "Energy.track_energy")
    return asv_threshold(thresholds, f"{energy}({', '.join(repr(p) for p in params)})")


def render(views: list[MachineView], notes: data.Notes, commit_url: str,
           subjects: dict[str, dict[str, Any]], steps: list[Step] | None = None,
           thresholds: dict[str, float] | None = None) -> str:
    """The page; ``thresholds``: asv.conf.json's regressions_thresholds."""
    parts = [
        "<h1>Head to head: TileLang, Triton and torch</h1>",
        "<p>Per op and case, every backend at the latest commit each machine timed it. "
        "Time per call is asv's median; TFLOP/s and GB/s come from the point's records; "
        "<b>% of roofline</b> is the larger of TFLOP/s over the machine's best measured GEMM "
        "TFLOP/s (same dtype) and GB/s over its measured bandwidth roof (both from this "
        "history's records, never a datasheet); <b>vs torch</b> is torch's time over the "
        "backend's (above 1: faster than torch); <b>trend</b>: time per call over the "
        f"machine's last {TREND_COMMITS} commits (lower is faster). A dash has its reason "
        "on hover. <b>last step</b>: the latest step asv's publish flagged in the case's "
        "history on this machine (the regressions page), with what the gate would say of "
        "it: time and energy per call across it, and whose its clock change is.</p>",
        notes_box(notes, "files"),
    ]
    steps = steps or []
    by_point = latest_by_point(steps)
    if not views:
        parts.append('<p class="why" id="no-machines">No machine has results in this '
                     "history: run <code>kperf run</code> first.</p>")
    for v in views:
        parts += _machine_section(v, steps, by_point, commit_url, subjects, thresholds)
    return page("Head to head", "\n".join(parts), "h2h")


def _machine_section(v: MachineView, steps: list[Step],
                     by_point: dict[tuple[str, str, str], Step], commit_url: str,
                     subjects: dict[str, dict[str, Any]],
                     thresholds: dict[str, float] | None) -> list[str]:
    gpu = v.info.get("gpu") or "?"
    parts = [f'<h2 id="machine-{esc(v.name)}">machine <code>{esc(v.name)}</code> '
             f'<span class="muted">GPU: {esc(gpu)}</span></h2>']
    if v.why_empty:
        parts.append(f'<p class="why machine-empty">No head-to-head for this machine: '
                     f"{esc(v.why_empty)}.</p>")
        return parts
    parts.append(_roofs_table(v))
    parts.append(f'<h3 id="{esc(v.name)}-steps">Steps in the history</h3>'
                 + steps_table(v.name, steps, commit_url))
    for t in v.tables:
        subj = subjects.get(t.commit, {}).get("subject")
        parts.append(
            f'<h3 id="{esc(v.name)}-{esc(t.op)}">{esc(t.op)} <span class="muted">'
            f"at {commit_link(t.commit, commit_url, subject=subj)} "
            f'{esc(subj or "")} · env {esc(t.env_name)}</span></h3>')
        parts.append(_op_table(v, t, by_point, thresholds))
    return parts


def _roofs_table(v: MachineView) -> str:
    roofs = "".join(
        f'<tr><td class="l">compute, {esc(d)}</td><td{data_attr(r.value)}>'
        f"{fmt_num(r.value)} TFLOP/s</td><td class=l>{esc(r.source)}</td></tr>"
        for d, r in sorted(v.compute_roofs.items()))
    if not v.compute_roofs:
        roofs += ('<tr><td class="l">compute</td><td>—</td><td class="l why">no GEMM '
                  "was timed on this machine: no compute roof, % of roofline uses "
                  "bandwidth only</td></tr>")
    bw = v.bandwidth_roof
    roofs += (f'<tr><td class="l">bandwidth</td><td{data_attr(bw.value)}>'
              f'{fmt_num(bw.value, 4) + " GB/s" if bw.value else "—"}</td>'
              f'<td class="l">{esc(bw.source)}</td></tr>')
    return (f'<table class="roofs"><tr><th class="l">roof</th><th>value</th>'
            f'<th class="l">from</th></tr>{roofs}</table>')


def _op_table(v: MachineView, t: OpTable, by_point: dict[tuple[str, str, str], Step],
              thresholds: dict[str, float] | None) -> str:
    body = []
    for case, dtype, cells in t.rows:
        for i, c in enumerate(cells):
            lead = (f'<td class="l" rowspan="{len(cells)}">{esc(case)}</td>'
                    f'<td class="l" rowspan="{len(cells)}">{esc(dtype)}</td>'
                    if i == 0 else "")
            point = data.params_text({"case": case, "dtype": dtype, "backend": c.backend})
            step = by_point.get((v.name, t.benchmark, point))
            limit = _energy_threshold(thresholds, t.benchmark, (case, dtype, c.backend))
            body.append(f'<tr data-machine="{esc(v.name)}" data-op="{esc(t.op)}" '
                        f'data-case="{esc(case)}" data-dtype="{esc(dtype)}" '
                        f'data-backend="{esc(c.backend)}" data-commit="{esc(t.commit)}"'
                        f">{lead}{_cell_row(c, limit)}{step_cell(step)}</tr>")
    return (f'<table class="h2h" data-benchmark="{esc(t.benchmark)}">{HEAD}'
            f'{"".join(body)}</table>')
