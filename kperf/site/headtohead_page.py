"""kperf/head-to-head.html: per machine its roofs and the steps asv flagged with their
causes, then per op and case every backend's row (kperf/site/headtohead.py gathers the
figures and says where each comes from; templates/headtohead.html lays them out)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from kperf.site import data
from kperf.site.headtohead import BASELINE, TREND_COMMITS, Cell, MachineView, hold_effect
from kperf.site.pages import render as render_template
from kperf.site.pages import template_module
from kperf.site.steps import Step, latest_by_point

CAUSE_WORDS = {"code": "the code's own", "environment": "the environment's",
               "none": "no clock change", "unknown": "cause unknown",
               "no-cost": "changed, no cost"}


def step_short(step: Step) -> str:
    """The flagged series' own change: time per call, or energy per call."""
    if step.series.startswith(step.time_benchmark + "(") and step.time_ratio is not None:
        return f"x{step.time_ratio:.3f}"
    if step.energy_ratio is not None:
        return f"energy {100 * (step.energy_ratio - 1):+.1f}%"
    return f"x{step.asv_ratio:.3f}" if step.asv_ratio else "step"


def _mhz(x: float | None) -> str:
    return f"{x:.0f} MHz" if x else "—"


def _watts(x: float | None) -> str:
    return f"{x:.0f} W" if x else "—"


GLOBALS = {"step_short": step_short, "cause_words": CAUSE_WORDS, "mhz": _mhz,
           "watts": _watts, "baseline": BASELINE}


def steps_table(name: str, steps: list[Step], commit_url: str) -> Markup:
    """The steps asv flagged on one machine, newest first, each with its cause."""
    mine = sorted((s for s in steps if s.machine == name), key=lambda s: -s.revision)
    return template_module("headtohead_macros.html", GLOBALS).steps_table(mine, commit_url)


def energy_title(c: Cell, threshold: float | None) -> str:
    flag = (f"the history flags a step of this energy series beyond {100 * threshold:g}% "
            "(asv.conf.json: its class's run-to-run spread, docs/site.md)"
            if threshold is not None else "")
    return ". ".join(p for p in (flag, c.energy_state) if p)


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


def held_title(c: Cell) -> str:
    """Why a point is marked "held": its reps waited behind a hold (its host fell behind
    the GPU); empty where they did not or it is not recorded."""
    if not c.rep_hold_s:
        return ""
    title = (f"its host fell behind the GPU, so each timed rep waited behind a "
             f"{c.rep_hold_s * 1e6:.0f} µs hold (kperf/core/reps.py); a kernel's time moves "
             f"with such a hold. {_hold_effect_text(c)}")
    if c.regimes_differ:
        title += (". Another backend of this case ran without one: the two times are not "
                  "from one regime")
    return title


def _energy_threshold(thresholds: dict[str, float] | None, time_benchmark: str,
                      params: tuple[str, ...]) -> float | None:
    from kperf.gate.asvio import asv_threshold

    if not isinstance(thresholds, dict) or not thresholds:
        return None
    energy = time_benchmark.replace("Time.track_time", "Energy.track_energy")
    return asv_threshold(thresholds, f"{energy}({', '.join(repr(p) for p in params)})")


def _machine(v: MachineView, steps: list[Step], by_point: dict[tuple[str, str, str], Step],
             subjects: dict[str, dict[str, Any]],
             thresholds: dict[str, float] | None) -> dict[str, Any]:
    tables = []
    for t in v.tables:
        rows = []
        for case, dtype, cells in t.rows:
            for i, c in enumerate(cells):
                point = data.params_text({"case": case, "dtype": dtype, "backend": c.backend})
                limit = _energy_threshold(thresholds, t.benchmark, (case, dtype, c.backend))
                rows.append({"case": case, "dtype": dtype, "cell": c, "lead": i == 0,
                             "span": len(cells), "held": held_title(c),
                             "energy_title": energy_title(c, limit),
                             "step": by_point.get((v.name, t.benchmark, point))})
        tables.append({"table": t, "rows": rows,
                       "subject": subjects.get(t.commit, {}).get("subject")})
    mine = sorted((s for s in steps if s.machine == v.name), key=lambda s: -s.revision)
    return {"view": v, "steps": mine, "tables": tables}


def render(views: list[MachineView], notes: data.Notes, commit_url: str,
                subjects: dict[str, dict[str, Any]], steps: list[Step] | None = None,
                thresholds: dict[str, float] | None = None) -> str:
    """The page; ``thresholds``: asv.conf.json's regressions_thresholds."""
    steps = steps or []
    by_point = latest_by_point(steps)
    machines = [_machine(v, steps, by_point, subjects, thresholds) for v in views]
    return render_template("headtohead.html", GLOBALS, title="Head to head", here="h2h",
                           notes=notes, commit_url=commit_url, trend_commits=TREND_COMMITS,
                           machines=machines)

