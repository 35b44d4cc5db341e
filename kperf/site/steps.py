"""The cause of each step asv's publish flagged (``regressions.json``), said as the gate
would say it: time and energy per call across the step, SM clock and board power on
either side, and whose the clock change is.

A step is between two commits of one series on one machine: the last commit of the level
before it and the first of the level after (asv's jump; where that is one commit, its
predecessor with a value). Both commits' records (kperf/core/record.py, one per benchmark
process) become the gate's blocks (``kperf.gate.asvio.attach_records``) and the gate's
``kperf.gate.model.attribute`` judges the clock gap over every pair of a run before and a
run after the step: the code's when both sides ran at the power limit with no thermal or
hardware-slowdown bit and the clock moved the same way in every pair (it follows the
commit); else the environment's. A history runs each commit once, so a pair is often
all there is; the gate confirms a verdict over rounds, the history says what one run a
side shows (docs/site.md, "The cause of a step").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kperf.core.telemetry import or_bits
from kperf.core.telemetry.processes import records_note
from kperf.gate import codegen
from kperf.gate.asvio import attach_records
from kperf.gate.config import Thresholds
from kperf.gate.look import static_cost
from kperf.gate.model import Attribution, Block, attribute, method_note, one_method
from kperf.site import data

STEPS_SCHEMA = "kperf-steps-1"
TIME = re.compile(r"^(bench_\w+\.\w+)Time\.track_time$")
ENERGY = re.compile(r"^(bench_\w+\.\w+)Energy\.track_energy$")


@dataclass
class Side:
    """One commit at a step: asv's values and what its records say."""

    commit: str
    time_s: float | None = None
    energy_j: float | None = None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    throttle_bits: int | None = None
    runs: int = 0  # records (benchmark processes) of the point
    # how its records timed the kernel: "graph" (replay of many calls) or "events" (one
    # call between events after an L2 flush); "mixed" where they differ, None: unknown
    method: str | None = None
    # how its energy bursts ran: "graph" (replayed), "calls" (launched call by call),
    # "mixed"; None where its records do not say (before 2026-12-04)
    burst_method: str | None = None
    point_id: str = ""  # its rows on the telemetry page


@dataclass
class Step:
    series: str  # as asv names it: benchmark(param, ...)
    machine: str
    time_benchmark: str
    params: dict[str, Any]
    before: Side
    after: Side
    revision: int  # asv's revision of the commit after the step
    asv_ratio: float | None = None  # asv's jump: the level after over the level before
    threshold: float | None = None  # asv.conf.json's for this series
    time_ratio: float | None = None
    energy_ratio: float | None = None
    cause: str = "unknown"  # code | environment | none | no-cost | unknown
    why: str = ""
    text: str = ""
    id: str = field(default="")
    graph_path: str = ""  # asv's graph of the series: its machine's and environment's


@dataclass
class History:
    """What publishing read: asv's results on every machine, and the records."""

    files: list[data.ResultFile]
    benchmarks: dict[str, Any]
    records: list[dict[str, Any]]
    revisions: dict[str, int]  # commit -> asv's revision

    def __post_init__(self) -> None:
        self._files: dict[tuple[str, str], list[data.ResultFile]] = {}
        for rf in self.files:
            self._files.setdefault((rf.machine, rf.commit), []).append(rf)
        self._records: dict[str, list[dict[str, Any]]] = {}
        for rec in self.records:
            self._records.setdefault(data.record_key(rec), []).append(rec)

    def records_of(self, key: str) -> list[dict[str, Any]]:
        """The records of one point (``data.point_key``)."""
        return self._records.get(key, [])

    def files_of(self, machine: str, commit: str,
                 graph_path: str | None = None) -> list[data.ResultFile]:
        """The results files of a commit on a machine; with ``graph_path``, only those of
        that graph's environment (a machine with several, such as a toolchain or stack
        matrix, has a graph and a file per environment)."""
        return [rf for rf in self._files.get((machine, commit), [])
                if graph_path is None or in_graph(rf, graph_path)]

    def value(self, machine: str, commit: str, bench: str, idx: int,
              graph_path: str | None = None) -> float | None:
        for rf in self.files_of(machine, commit, graph_path):
            points = data.points_of(rf, bench, self.benchmarks)
            if idx < len(points) and points[idx].status == "ok":
                return float(points[idx].value)
        return None

    def records_in(self, key: str, envs: set[str] | None) -> list[dict[str, Any]]:
        """The records of one point, of the environments ``envs`` only where given."""
        recs = self.records_of(key)
        return recs if envs is None else [r for r in recs if str(r.get("env_name")) in envs]

    def params(self, bench: str, idx: int) -> dict[str, Any]:
        for rf in self.files:
            points = data.points_of(rf, bench, self.benchmarks)
            if idx < len(points):
                return points[idx].params
        return {}

    def previous(self, machine: str, bench: str, idx: int, revision: int,
                 graph_path: str | None = None) -> str | None:
        """The latest commit before ``revision`` with a value of the series."""
        earlier = [(self.revisions[rf.commit], rf.commit) for rf in self.files
                   if rf.machine == machine and self.revisions.get(rf.commit, revision) < revision
                   and self.value(machine, rf.commit, bench, idx, graph_path) is not None]
        return max(earlier)[1] if earlier else None


def in_graph(rf: data.ResultFile, graph_path: str) -> bool:
    """Whether a results file is of the graph's machine and environment: asv names a
    graph's folders ``<param>-<value>`` by its results' parameters (asv's
    ``Graph.get_file_path``). A file that does not say its parameters is not told apart."""
    from asv.util import sanitize_filename

    if not rf.params:
        return True
    parts = set(re.split(r"[\\/]", graph_path))
    return all(sanitize_filename(f"{k}-null" if v is None else f"{k}-{v}" if v else str(k))
               in parts for k, v in rf.params.items())


def machine_of(graph_path: str, machines: Sequence[str]) -> str | None:
    """The machine of an asv graph (its path holds ``machine-<name>``, sanitised)."""
    from asv.util import sanitize_filename

    parts = set(re.split(r"[\\/]", graph_path))
    return next((m for m in machines if sanitize_filename(f"machine-{m}") in parts), None)


def twins(benchmark: str) -> tuple[str, str] | None:
    """(time benchmark, energy benchmark) of a timed or energy series; None otherwise."""
    m = TIME.match(benchmark) or ENERGY.match(benchmark)
    return (f"{m.group(1)}Time.track_time", f"{m.group(1)}Energy.track_energy") if m else None


def find_steps(regressions: dict[str, Any], rev_to_hash: dict[str, str],
               machines: Sequence[str], history: History, th: Thresholds | None,
               thresholds: dict[str, float] | None = None) -> list[Step]:
    """Every jump of a timed or energy series in asv's ``regressions.json``, with its
    cause; static figures and compile times are left out (exact / host timings)."""
    from kperf.gate.asvio import asv_threshold

    out = []
    for entry in regressions.get("regressions") or []:
        if not isinstance(entry, list) or len(entry) != 7:  # not asv 0.6's shape
            continue
        name, graph_path, _params, idx, _last, _best, jumps = entry
        bench = name.split("(", 1)[0]
        pair = twins(bench)
        machine = machine_of(graph_path, machines)
        if machine is None or idx is None or (pair is None and not is_code(bench)):
            continue
        for rev1, rev2, v1, v2 in jumps or []:
            after = rev_to_hash.get(str(rev2))
            before = (rev_to_hash.get(str(rev1)) if rev1 is not None
                      else history.previous(machine, bench, idx, int(rev2), graph_path))
            if not after or not before:
                continue
            step = Step(series=name, machine=machine, time_benchmark=pair[0] if pair else bench,
                        params=history.params(pair[0] if pair else bench, idx),
                        before=Side(before), after=Side(after), revision=int(rev2),
                        asv_ratio=v2 / v1 if v1 else None,
                        threshold=asv_threshold(thresholds, name) if thresholds else None,
                        graph_path=graph_path)
            if pair:
                explain(step, pair, idx, history, th)
            else:
                explain_code(step, idx, history)
            out.append(step)
    return out


def explain(step: Step, pair: tuple[str, str], idx: int, history: History,
            th: Thresholds | None) -> None:
    """Fill the sides' figures, the ratios and the cause of ``step``."""
    blocks, recs_by = {}, {}
    graph = step.graph_path or None
    for label, side in (("base", step.before), ("head", step.after)):
        side.time_s = history.value(step.machine, side.commit, pair[0], idx, graph)
        side.energy_j = history.value(step.machine, side.commit, pair[1], idx, graph)
        key = data.point_key(step.machine, side.commit, pair[0], step.params)
        envs = ({rf.env_name for rf in history.files_of(step.machine, side.commit, graph)}
                if graph else None)
        recs = recs_by[label] = history.records_in(key, envs)
        side.point_id, side.runs = data.point_id(key), len(recs)
        blocks[label] = _fill_side(side, recs, label)
    step.time_ratio = _ratio(step.before.time_s, step.after.time_s)
    step.energy_ratio = _ratio(step.before.energy_j, step.after.energy_j)
    step.cause, step.why = _cause(blocks["base"], blocks["head"], th)
    # another process on the GPU in a run either side: named, as the gate names it
    step.text = summary(step) + records_note(recs_by["base"], recs_by["head"])
    step.id = data.point_id(f"{step.machine}|{step.series}|{step.after.commit}")


def _fill_side(side: Side, recs: list[dict[str, Any]], label: str) -> list[Block]:
    blocks = [_block(rec, label, i) for i, rec in enumerate(recs)]
    blocks = [b for b in blocks if b.clocks]
    if side.energy_j is None:
        side.energy_j = data.median_or_none([r.get("energy_per_call_j") for r in recs])
    side.sm_clock_mhz = data.median_or_none([b.clock() for b in blocks])
    side.power_w = data.median_or_none([b.power() for b in blocks])
    limits = [b.power_limit_w for b in blocks if b.power_limit_w]
    side.power_limit_w = min(limits) if limits else None
    side.throttle_bits = or_bits(b.throttle_bits for b in blocks)
    side.method = one_method((r.get("measurement") or {}).get("mode") for r in recs)
    side.burst_method = burst_method(recs)
    return blocks


def burst_method(recs: Sequence[dict[str, Any]]) -> str | None:
    """How the records' energy bursts ran (``kperf/core/energy.py``): all replayed as a graph,
    all launched call by call, or mixed; None where no burst says."""
    bursts = [b for r in recs
              for b in ((r.get("measurement") or {}).get("energy_burst") or {}).get("per_burst")
              or [] if isinstance(b, dict) and isinstance(b.get("by_graph"), bool)]
    return one_method("graph" if b["by_graph"] else "calls" for b in bursts)


def _block(rec: dict[str, Any], side: str, index: int) -> Block:
    """A record as the gate's block: its samples, and their telemetry attached as the gate
    attaches it to asv's samples."""
    m = rec.get("measurement") or {}
    samples = [float(s) for s in m.get("samples") or [] if isinstance(s, int | float)]
    block = Block(side, index + 1, samples=samples, at_cap=bool(m.get("at_cap")))
    if samples:
        attach_records(block, [rec])
    return block


def _ratio(before: float | None, after: float | None) -> float | None:
    return after / before if before and after is not None else None


def _cause(base: list[Block], head: list[Block], th: Thresholds | None) -> tuple[str, str]:
    if th is None:
        return "unknown", "thresholds.json could not be read"
    missing = [label for label, blocks in (("before", base), ("after", head)) if not blocks]
    if missing:
        return "unknown", f"no record with clock readings {' or '.join(missing)} the step"
    pairs = [(b, h) for b in base for h in head]
    found: Attribution = attribute(pairs, th, min_pairs=1)
    if found.kind == "code":
        runs = ("one run a side" if len(pairs) == 1 else
                f"every one of {len(pairs)} pairs of runs across it")
        return "code", (f"at the power limit on both sides, no thermal or slowdown bit, and "
                        f"the clock moved with the commit ({runs})")
    if found.kind == "environment":
        return "environment", found.why
    return "none", found.why or "the clock held"


def summary(step: Step) -> str:
    """One line, e.g. ``x1.095, energy +9.7%, clock 1362 -> 1229 MHz at the 700 W limit:
    the code's own``."""
    b, a = step.before, step.after
    parts = []
    if step.time_ratio is not None:
        parts.append(f"x{step.time_ratio:.3f}")
    if step.energy_ratio is not None:
        parts.append(f"energy {100 * (step.energy_ratio - 1):+.1f}%")
    if b.sm_clock_mhz and a.sm_clock_mhz:
        clock = f"clock {b.sm_clock_mhz:.0f} → {a.sm_clock_mhz:.0f} MHz"
        limit = b.power_limit_w or a.power_limit_w
        if step.cause == "code" and limit:
            clock += f" at the {limit:.0f} W limit"
        elif b.power_w and a.power_w:
            clock += f", {b.power_w:.0f} → {a.power_w:.0f} W" + (
                f" of {limit:.0f}" if limit else "")
        parts.append(clock)
    head = ", ".join(parts) or "no figures"
    if step.cause == "code":
        line = f"{head}: the code's own"
    elif step.cause == "environment":
        line = f"{head}: the environment's ({step.why})"
    elif step.cause == "none":
        line = f"{head}: the clock held, not a clock effect"
    elif step.cause == "no-cost":
        line = f"{head}: changed, no cost ({step.why})"
    else:
        line = f"{head}: cause unknown ({step.why})"
    burst = burst_change(b.burst_method, a.burst_method) if step.energy_ratio is not None else ""
    return line + method_change(b.method, a.method) + burst


def method_change(before: str | None, after: str | None) -> str:
    """A note where the two sides timed the kernel differently: a call timed alone after
    an L2 flush reads otherwise than calls replayed back to back (a LayerNorm of 10.8 us
    replayed read 15.9 us so, H200 vm-nvidia-h200-eb9ed144, 2026-12-04), so part of the
    step is the method's. A call near ``Plan.graph_below_s`` changes method crossing it."""
    if not before or not after or before == after:
        return ""
    return "; " + method_note(before, after, ("before", "after"), "step")


BURST_NAMES = {"graph": "replayed as a graph", "calls": "launched call by call",
               "mixed": "some replayed as a graph, some call by call"}


def burst_change(before: str | None, after: str | None) -> str:
    """A note where the two sides' energy bursts ran differently. A burst replays a graph
    where the host fell behind in the trials or in a burst (``Runner.burst``), which can
    differ between two runs of one kernel: the decode16 Triton GEMM's bursts ran call by
    call at one commit and as a graph at the next, their energy per call 9.67% apart with
    no change of code (H200 vm-nvidia-h200-0b7c2346, 2026-12-04, docs/journal/2026-12-04.md
    "Night of 2026-12-04")."""
    if not before or not after or before == after:
        return ""
    return (f"; energy bursts {BURST_NAMES.get(before, before)} before, "
            f"{BURST_NAMES.get(after, after)} after: part of the energy change is the method's")


def read_regressions(html_dir: Path, notes: data.Notes) -> tuple[dict[str, Any], dict[str, str]]:
    """(regressions.json, revision -> commit) of a site asv published; empty if absent."""
    try:
        regressions = json.loads((html_dir / "regressions.json").read_text())
        index = json.loads((html_dir / "index.json").read_text())
        return regressions, {str(r): h for r, h in index.get("revision_to_hash", {}).items()}
    except FileNotFoundError:
        return {}, {}
    except (OSError, ValueError, AttributeError) as err:
        notes.add("regressions.json", f"cannot be read ({err}): no step has its cause")
        return {}, {}


def write(path: Path, steps: Sequence[Step]) -> None:
    payload = {"schema": STEPS_SCHEMA, "steps": [asdict(s) for s in steps]}
    path.write_text(json.dumps(payload, sort_keys=True))


def latest_by_point(steps: Sequence[Step]) -> dict[tuple[str, str, str], Step]:
    """(machine, time benchmark, params text) -> its latest step, for the head-to-head;
    of a time and an energy step at one commit, the time's."""
    out: dict[tuple[str, str, str], Step] = {}
    for s in sorted(steps, key=lambda s: (s.revision, s.series.startswith(s.time_benchmark))):
        out[(s.machine, s.time_benchmark, data.params_text(s.params))] = s
    return out


def from_site(html_dir: Path, conf: dict[str, Any], machines: Sequence[str],
              history: History, thresholds_path: Path, notes: data.Notes) -> list[Step]:
    """The steps of a site asv just published into ``html_dir``, with their causes."""
    regressions, rev_to_hash = read_regressions(html_dir, notes)
    if not regressions:
        return []
    try:
        th = Thresholds.load(thresholds_path)
    except ValueError as err:  # a ConfigError names the file and field
        notes.add(thresholds_path.name, f"cannot be read ({err}): steps show no cause")
        th = None
    table = conf.get("regressions_thresholds")
    return find_steps(regressions, rev_to_hash, machines, history, th,
                      table if isinstance(table, dict) else None)


# ------------------------------------------------------------------ steps of code series
# A register count, LDS bytes, an occupancy, code size, a cold compile: what changed in the
# generated code, as the PR gate says it (kperf/gate/codegen.py), from the codegen records
# of the commits either side, in the series' own environment (a gfx942 toolchain is one).

CODE = re.compile(r"^(bench_\w+\.\w+?)(?:(?:Registers|Scratch|SharedMem|Occupancy|CodeSize)"
                  r"\.track_value|(Compile)\.track_compile)$")


def is_code(benchmark: str) -> bool:
    """A static figure's or a cold compile's series."""
    return CODE.match(benchmark) is not None


def figures_of(step: Any, side: Any, history: Any) -> dict[str, Any] | None:
    """A side's figures of the step's kernel: its latest codegen record at that commit in
    the series' environment, with the tile configuration under ``config``."""
    prefix = CODE.match(step.time_benchmark).group(1)
    key = data.point_key(step.machine, side.commit, f"{prefix}CodeSize.track_value", step.params)
    graph = step.graph_path or None
    envs = ({rf.env_name for rf in history.files_of(step.machine, side.commit, graph)}
            if graph else None)
    recs = [r for r in history.records_in(key, envs) if isinstance(r.get("figures"), dict)]
    if not recs:
        return None
    latest = max(recs, key=lambda r: float(r.get("recorded_at") or 0.0))
    return {**latest["figures"], "config": latest.get("config") or {}}


def explain_code(step: Any, idx: int, history: Any) -> None:
    """Fill a code step's cause: the kernel's line as the gate writes it, and for a cold
    compile its ratio, which is the code's only where the code changed too."""
    graph = step.graph_path or None
    before, after = (history.value(step.machine, s.commit, step.time_benchmark, idx, graph)
                     for s in (step.before, step.after))
    figures = [figures_of(step, s, history) for s in (step.before, step.after)]
    params = step.params
    kernel = codegen.Kernel(op=step.time_benchmark.split(".", 1)[0].removeprefix("bench_"),
                            case="", dtype=str(params.get("dtype", "")),
                            backend=str(params.get("backend", "")),
                            target=str(params.get("target", "")), toolchain=None,
                            base=figures[0], head=figures[1])
    line = codegen.cause_line(kernel).split(": ", 1)[-1]
    compiled = CODE.match(step.time_benchmark).group(2)
    if compiled and before and after:
        step.time_ratio = after / before
        line = f"cold compile x{after / before:.3f} ({before:.2f} → {after:.2f} CPU s); {line}"
    if None in figures:
        step.cause, step.why = "unknown", "no codegen record of this kernel on both sides"
    elif kernel.code_unchanged() and compiled:
        step.cause = "none"
        step.why = "the device code is the same on both sides: the compiler's own time moved"
    elif not compiled and not (cost := static_cost(*figures)).startswith("costs"):
        # the gate's rule (docs/gate.md): red only where it costs
        step.cause = "no-cost"
        step.why = f"the generated code changed; {cost}: not a regression by the gate's rule"
    else:
        step.cause, step.why = "code", "the generated code changed"
    step.text = line
    step.id = data.point_id(f"{step.machine}|{step.series}|{step.after.commit}")
