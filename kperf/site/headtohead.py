"""The head-to-head page's figures: per op and case, TileLang vs Triton vs torch at the latest
commit of each machine, and the page (``render``: per machine its roofs and the steps asv
flagged with their causes, then per op and case every backend's row).

Time per call is asv's result; TFLOP/s, GB/s and energy per call the point's records
(the median over its processes); % of roofline the larger of TFLOP/s over the machine's
best GEMM TFLOP/s for that dtype and GB/s over its bandwidth roof (a copy's GB/s, else the
best any kernel reached, said as such): measured from the history, never a datasheet;
ratio to torch is torch's time over this backend's; the trend is asv's medians over the
machine's last commits (docs/site.md, "Head to head"). Failed and skipped cases show why.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from kperf.site import data
from kperf.site.pages import render as render_template
from kperf.site.pages import template_module
from kperf.site.steps import Step, latest_by_point

TIME_BENCH = re.compile(r"^bench_(\w+)\.(\w+)Time\.track_time$")
GEMM_OPS = ("gemm", "fp8_gemm")
BACKEND_ORDER = ("tilelang", "triton", "torch")
BASELINE = "torch"
TREND_COMMITS = 20

FAILED_REASON = ("the benchmark process failed: a compile error, a wrong or NaN result "
                 "(checked before timing), a crash or a timeout. asv keeps no error text "
                 "in its results; the run's log has it")
SKIPPED_REASON = ("this op, case or backend does not exist at this commit (setup raised "
                  "NotImplementedError), or the run did not select it (-b)")


@dataclass
class Roof:
    value: float | None
    source: str  # what it was derived from, or why there is none


@dataclass
class Cell:
    backend: str
    status: str  # ok | failed | skipped | absent
    reason: str = ""
    time_s: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roof_frac: float | None = None
    roof_kind: str = ""
    roof_why: str = ""
    vs_torch: float | None = None
    vs_torch_why: str = ""
    energy_j: float | None = None
    energy_why: str = ""
    energy_state: str = ""  # how its energy burst ran and the board's state before it
    sm_mhz: float | None = None
    # the hold before each rep where its host fell behind the GPU (kperf/core/reps.py; the
    # longest over the point's records; None: not recorded); ``regimes_differ``: another
    # backend of the row was measured behind none, or the other way round
    rep_hold_s: float | None = None
    regimes_differ: bool = False
    # per trend commit, the hold its point was timed behind (as ``rep_hold_s``; None: no
    # record says): the held and unheld times of the trend are the page's figure of the hold
    trend_hold: list[float | None] = field(default_factory=list)
    point_id: str = ""
    n_records: int = 0
    timed_at: str = ""  # the earlier commit the baseline was timed at, when not at this one
    trend: list[float | None] = field(default_factory=list)


@dataclass
class OpTable:
    op: str
    benchmark: str
    commit: str
    env_name: str
    rows: list[tuple[str, str, list[Cell]]]  # (case, dtype, cells)


@dataclass
class MachineView:
    name: str
    info: dict[str, Any]
    tables: list[OpTable]
    compute_roofs: dict[str, Roof]
    bandwidth_roof: Roof
    why_empty: str = ""


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) \
        and math.isfinite(x) else None


def _rec_figure(recs: list[dict[str, Any]], key: str) -> float | None:
    vals = [v for r in recs if (v := _finite(r.get(key))) is not None]
    return statistics.median(vals) if vals else None


def _roofs(machine: str, records: list[dict[str, Any]]) -> tuple[dict[str, Roof], Roof]:
    best_c: dict[str, tuple[float, dict[str, Any]]] = {}
    best_bw: tuple[float, dict[str, Any]] | None = None
    copy_bw: tuple[float, dict[str, Any]] | None = None
    for rec in records:
        if rec.get("machine") != machine:
            continue
        m = TIME_BENCH.match(rec["benchmark"])
        tflops, gbps = _finite(rec.get("tflops")), _finite(rec.get("gbps"))
        is_copy = "copy" in rec["benchmark"].lower() or rec.get("kind") == "copy"
        if is_copy and gbps is not None and (copy_bw is None or gbps > copy_bw[0]):
            copy_bw = (gbps, rec)
        if m and m.group(1) in GEMM_OPS and tflops is not None:
            dtype = str(rec["params"].get("dtype", "?"))
            if dtype not in best_c or tflops > best_c[dtype][0]:
                best_c[dtype] = (tflops, rec)
        if gbps is not None and not is_copy and (best_bw is None or gbps > best_bw[0]):
            best_bw = (gbps, rec)

    def where(rec: dict[str, Any]) -> str:
        p = rec["params"]
        return (f"{rec['benchmark'].split('.')[0].removeprefix('bench_')} "
                f"{p.get('case', '')} {p.get('dtype', '')} {p.get('backend', '')} "
                f"@ {str(rec.get('commit') or '')[:8]}")

    compute = {d: Roof(v, f"best GEMM TFLOP/s measured on this machine: {where(r)}")
               for d, (v, r) in best_c.items()}
    if copy_bw:
        bw = Roof(copy_bw[0], f"copy bandwidth measured on this machine: {where(copy_bw[1])}")
    elif best_bw:
        bw = Roof(best_bw[0], "no copy bandwidth is recorded; the best GB/s any kernel "
                              f"reached on this machine stands in: {where(best_bw[1])}")
    else:
        bw = Roof(None, "no record of this machine holds a GB/s figure")
    return compute, bw


def build(machines: dict[str, dict[str, Any]], files: list[data.ResultFile],
          benchmarks: dict[str, Any], records: list[dict[str, Any]],
          reasons: dict[str, str] | None = None,
          revisions: dict[str, int] | None = None) -> list[MachineView]:
    """The page's model. ``reasons``: point key -> why it failed; ``revisions``: commit ->
    asv's revision number (commit order; dates tie when commits share a second)."""
    reasons = reasons or {}
    revisions = revisions or {}
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_key[data.record_key(rec)].append(rec)
    time_benches = sorted({b for rf in files for b in rf.results if TIME_BENCH.match(b)}
                          | {b for b in benchmarks if TIME_BENCH.match(b)})
    views = []
    for name in sorted(set(machines) | {rf.machine for rf in files}):
        info = machines.get(name, {})
        mine = [rf for rf in files if rf.machine == name]
        if all(rf.commit in revisions for rf in mine):
            mine.sort(key=lambda rf: (revisions[rf.commit], rf.env_name))
        else:
            mine.sort(key=lambda rf: (rf.date, revisions.get(rf.commit, -1), rf.env_name))
        compute_roofs, bw_roof = _roofs(name, records)
        tables = []
        for bench in time_benches:
            history = [rf for rf in mine if any(
                p.status != "skipped" for p in data.points_of(rf, bench, benchmarks))]
            if not history:
                continue
            latest = history[-1]
            tables.append(_table(name, bench, latest, history, benchmarks, by_key, reasons,
                                 compute_roofs, bw_roof))
        why = ""
        if not tables:
            gpu = str(info.get("gpu", ""))
            why = ("this machine has no GPU: only the CPU-side suites ran (static figures "
                   "and compile times), and every GPU timing suite is absent from its "
                   "results" if gpu in ("", "none") else
                   "no GPU timing suite (*Time.track_time) has a timed result on this "
                   "machine yet")
        views.append(MachineView(name, info, tables, compute_roofs, bw_roof, why))
    return views


def _table(machine: str, bench: str, latest: data.ResultFile, history: list[data.ResultFile],
           benchmarks: dict[str, Any], by_key: dict[str, list[dict[str, Any]]],
           reasons: dict[str, str], compute_roofs: dict[str, Roof], bw_roof: Roof) -> OpTable:
    op = TIME_BENCH.match(bench).group(1)
    points = data.points_of(latest, bench, benchmarks)
    trend_files = history[-TREND_COMMITS:]
    trend_points = [{data.params_text(p.params): p for p in data.points_of(rf, bench, benchmarks)}
                    for rf in trend_files]
    # A run times the baseline only where what its timing depends on changed (--baseline
    # changed), so the latest commit often has it as a skip; under --kernels changed a
    # TileLang or Triton case too, where its record says so (a case timed under the
    # default and skipped later may be one the commit no longer has)
    earlier = _timed_earlier(history[:-1], bench, benchmarks,
                             lambda commit, p: p.params.get("backend") == BASELINE)
    kernels_earlier = _timed_earlier(
        history[:-1], bench, benchmarks, lambda commit, p: p.params.get("backend") != BASELINE
        and any(r.get("kernel_key")
                for r in by_key.get(data.point_key(machine, commit, bench, p.params), [])))
    groups: dict[tuple[str, str], dict[str, data.Point]] = {}
    for p in points:
        case, dtype = str(p.params.get("case", "")), str(p.params.get("dtype", ""))
        groups.setdefault((case, dtype), {})[str(p.params.get("backend", ""))] = p
    rows = []
    for (case, dtype), by_backend in groups.items():
        if all(p.status == "skipped" and data.params_text(p.params) not in kernels_earlier
               for p in by_backend.values()):
            continue  # a case no backend ran at this commit: not part of this run
        backends = [b for b in BACKEND_ORDER if b in by_backend] + sorted(
            b for b in by_backend if b not in BACKEND_ORDER)
        cells = []
        for backend in backends:
            p, commit = by_backend[backend], latest.commit
            ptext = data.params_text(p.params)
            if backend == BASELINE and p.status == "skipped" and ptext in earlier:
                commit, p = earlier[ptext]  # not timed again: unchanged (kperf/history/bench.py)
            elif p.status == "skipped" and ptext in kernels_earlier:
                commit, p = kernels_earlier[ptext]  # --kernels changed: the same
            key = data.point_key(machine, commit, bench, p.params)
            recs = by_key.get(key, [])
            cell = Cell(backend=backend, status=p.status, point_id=data.point_id(key),
                        n_records=len(recs),
                        timed_at=commit if commit != latest.commit else "")
            cell.trend = [
                (tp[ptext].value if ptext in tp and tp[ptext].status == "ok" else None)
                for tp in trend_points]
            cell.trend_hold = [
                _hold(by_key.get(data.point_key(machine, rf.commit, bench, tp[ptext].params),
                                 [])) if ptext in tp else None
                for rf, tp in zip(trend_files, trend_points, strict=True)]
            if p.status == "failed":
                cell.reason = reasons.get(key, FAILED_REASON)
            elif p.status == "skipped":
                cell.reason = reasons.get(key, SKIPPED_REASON)
            else:
                cell.time_s = float(p.value)
                _fill_from_records(cell, recs, dtype, compute_roofs, bw_roof)
            cells.append(cell)
        _mark_regimes(cells)
        base = next((c for c in cells if c.backend == BASELINE), None)
        for c in cells:
            if c.status != "ok" or c.backend == BASELINE:
                continue
            if base is None:
                c.vs_torch_why = "no torch baseline in this benchmark"
            elif base.status != "ok":
                c.vs_torch_why = f"torch {base.status} at this commit"
            else:
                c.vs_torch = base.time_s / c.time_s
                if base.timed_at:
                    c.vs_torch_why = f"torch as timed at {base.timed_at[:8]}"
        rows.append((case, dtype, cells))
    return OpTable(op=op, benchmark=bench, commit=latest.commit, env_name=latest.env_name,
                   rows=rows)


def _mark_regimes(cells: list[Cell]) -> None:
    """Flags a row whose backends were measured some behind a hold and some without: a
    kernel's time moves with the hold (docs/site.md, 'Head to head')."""
    known = [c for c in cells if c.status == "ok" and c.rep_hold_s is not None]
    held = {c.rep_hold_s > 0 for c in known}
    for c in known:
        c.regimes_differ = len(held) > 1


def _timed_earlier(history: list[data.ResultFile], bench: str, benchmarks: dict[str, Any],
                   keep: Callable[[str, data.Point], bool]) -> dict[str, tuple[str, data.Point]]:
    """params text -> (commit, point) of the latest timed point in ``history`` (oldest
    first) that ``keep(commit, point)`` accepts."""
    out: dict[str, tuple[str, data.Point]] = {}
    for rf in history:
        for p in data.points_of(rf, bench, benchmarks):
            if p.status == "ok" and keep(rf.commit, p):
                out[data.params_text(p.params)] = (rf.commit, p)
    return out


def _hold(recs: list[dict[str, Any]]) -> float | None:
    """The longest hold before a rep over a point's records (None: none records it)."""
    holds = [h for r in recs
             if (h := _finite((r.get("measurement") or {}).get("rep_hold_s"))) is not None]
    return max(holds) if holds else None


def hold_effect(cell: Cell) -> tuple[float, int, int] | None:
    """(median held time / median unheld time - 1, held commits, unheld commits) over the
    cell's trend, where it has both; None where it has not."""
    known = [(v, h) for v, h in zip(cell.trend, cell.trend_hold, strict=False)
             if v is not None and h is not None]
    held = [v for v, h in known if h > 0]
    unheld = [v for v, h in known if h == 0]
    if not held or not unheld:
        return None
    return statistics.median(held) / statistics.median(unheld) - 1.0, len(held), len(unheld)


def _fill_from_records(cell: Cell, recs: list[dict[str, Any]], dtype: str,
                       compute_roofs: dict[str, Roof], bw_roof: Roof) -> None:
    if not recs:
        why = "no record of this point was published (records are kept with the results)"
        cell.roof_why = cell.energy_why = why
        return
    cell.tflops = _rec_figure(recs, "tflops")
    cell.gbps = _rec_figure(recs, "gbps")
    clocks = []
    for r in recs:
        windows = (r.get("measurement") or {}).get("windows") or []
        clocks += [v for w in windows if isinstance(w, dict)
                   and (v := _finite(w.get("sm_clock_mhz_median"))) is not None]
    cell.sm_mhz = statistics.median(clocks) if clocks else None
    cell.rep_hold_s = _hold(recs)
    fracs = []
    croof = compute_roofs.get(dtype)
    if cell.tflops is not None and croof and croof.value:
        fracs.append((cell.tflops / croof.value, "compute"))
    if cell.gbps is not None and bw_roof.value:
        fracs.append((cell.gbps / bw_roof.value, "bandwidth"))
    if fracs:
        cell.roof_frac, cell.roof_kind = max(fracs)
    whys = []
    if not croof:
        whys.append(f"no GEMM timed on this machine in {dtype}: no compute roof")
    if not bw_roof.value:
        whys.append(bw_roof.source)
    cell.roof_why = "; ".join(whys)
    versions = [r.get("_schema_version", 1) for r in recs]
    cell.energy_j = _rec_figure(recs, "energy_per_call_j")
    cell.energy_state = "; ".join(filter(None, (data.energy_state(r) for r in recs)))
    if cell.energy_j is None:
        old = max(versions) < 2 and not any("energy_per_call_j" in r for r in recs)
        cell.energy_why = ("not recorded before schema 2 (kperf-record-2)" if old else
                           "the telemetry gave no energy counter for this point")


# --------------------------------------------------------------------------- the page
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

