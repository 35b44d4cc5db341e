"""The head-to-head page's figures: per op and case, TileLang vs Triton vs torch at the latest
commit of each machine (kperf/site/headtohead_page.py renders them).

Figures and where they come from:
- time per call: asv's result (median of the pooled samples) for that point;
- TFLOP/s, GB/s: the point's records (``tflops``, ``gbps``: each benchmark process's
  figure from its own median; the median over the point's processes);
- % of roofline: the larger of TFLOP/s over the machine's best GEMM TFLOP/s for that
  dtype and GB/s over its bandwidth roof: a copy's GB/s where a copy was recorded, else the
  best GB/s any kernel reached on that machine (stated as such). Both come from the records
  of the whole history, so they are measured, never a datasheet number;
- ratio to torch: torch's time over this backend's (above 1: faster than torch);
- energy per call: the records' ``energy_per_call_j`` (schema kperf-record-2);
- trend: asv's medians of that case and backend over the machine's last commits.
Failed and skipped cases are shown with their reason.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kperf.site import data

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
