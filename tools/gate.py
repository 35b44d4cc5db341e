"""PR regression gate: base against head, interleaved on one GPU, one verdict per case.

    python -m tools.gate                      # merge-base(HEAD, main) against HEAD
    python -m tools.gate --base v1.2 --head my-branch -b GemmTime
    python -m tools.gate --no-run             # re-analyse the last run's results

Base and head are measured by ``asv run`` in alternating order (A B, B A, A B, ...), one
benchmark process per side per round, into their own results directory
(``.asv/pr-results``), never into the published history. Each case gets SLOW, FAST, SAME
or INCONCLUSIVE (with the reason), from Mann-Whitney U and a bootstrap interval of the
median ratio, a suite-wide false-alarm correction, and a minimum magnitude per kernel
class from ``thresholds.json``. When the two sides ran at different clocks, a change must
also hold in cycles (time x clock). SLOW and FAST candidates are re-measured once before
the verdict is final. Writes ``gate.md`` (for a PR comment) and ``gate.json``.

Exit codes (the first that applies):
  2  a benchmark broke: a case failed at head, or the head run produced no results
  1  regression: at least one case is SLOW
  3  inconclusive or no baseline: a case is INCONCLUSIVE, or the base results are
     missing or unreadable
  0  pass: every case is SAME or FAST
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import stats

EXIT_PASS, EXIT_REGRESSION, EXIT_BROKEN, EXIT_INCONCLUSIVE = 0, 1, 2, 3
REPORT_SCHEMA = "kperf-gate-1"
THRESHOLDS_SCHEMA = "kperf-thresholds-1"
COMMENT_MARKER = "<!-- kperf-gate -->"


class GateError(Exception):
    """A condition that ends the gate with a given exit code and a message."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class KernelClass:
    name: str
    min_ratio: float = 0.0
    exact: bool = False


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    klass: str
    higher_is_better: bool = False


@dataclass
class Thresholds:
    path: Path
    alpha: float
    correction: str
    ci_level: float
    min_samples: int
    clock_tolerance: float
    benign_bits: dict[str, int]
    classes: dict[str, KernelClass]
    rules: list[Rule]

    @classmethod
    def load(cls, path: Path) -> Thresholds:
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError as err:
            raise ValueError(f"{path}: thresholds file not found") from err
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from err
        if raw.get("schema") != THRESHOLDS_SCHEMA:
            raise ValueError(f"{path}: schema must be {THRESHOLDS_SCHEMA!r}, "
                             f"got {raw.get('schema')!r}")
        classes = {name: _parse_class(path, name, spec)
                   for name, spec in _field(path, raw, "classes", dict).items()}
        rules = [_parse_rule(path, i, r, classes)
                 for i, r in enumerate(_field(path, raw, "rules", list))]
        bits = {k: _parse_bits(path, k, v) for k, v in raw.get("benign_throttle_bits", {}).items()
                if k != "doc"}
        out = cls(path=Path(path), alpha=float(raw.get("alpha", 0.01)),
                  correction=str(raw.get("correction", "bh")),
                  ci_level=float(raw.get("ci_level", 0.99)),
                  min_samples=int(raw.get("min_samples", 6)),
                  clock_tolerance=float(raw.get("clock_tolerance", 0.02)),
                  benign_bits=bits, classes=classes, rules=rules)
        if out.correction not in stats.ADJUSTERS:
            raise ValueError(f"{path}: correction {out.correction!r} is not one of "
                             f"{sorted(stats.ADJUSTERS)}")
        if not 0 < out.alpha < 1 or not 0 < out.ci_level < 1:
            raise ValueError(f"{path}: alpha and ci_level must lie in (0, 1)")
        return out

    def rule_for(self, case_name: str) -> tuple[Rule, KernelClass]:
        for rule in self.rules:
            if rule.pattern.search(case_name):
                return rule, self.classes[rule.klass]
        raise ValueError(f"{self.path}: no rule matches case {case_name!r}; "
                         f"add one (a final '.*' rule catches everything)")


def _field(path: Path, raw: dict, name: str, kind: type) -> Any:
    if not isinstance(raw.get(name), kind):
        raise ValueError(f"{path}: field {name!r} must be a {kind.__name__}")
    return raw[name]


def _parse_class(path: Path, name: str, spec: Any) -> KernelClass:
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: classes.{name} must be an object")
    if spec.get("exact"):
        return KernelClass(name, 0.0, True)
    if not isinstance(spec.get("min_ratio"), int | float) or spec["min_ratio"] < 0:
        raise ValueError(f"{path}: classes.{name}.min_ratio must be a number >= 0")
    return KernelClass(name, float(spec["min_ratio"]), False)


def _parse_rule(path: Path, index: int, raw: Any, classes: dict[str, KernelClass]) -> Rule:
    where = f"{path}: rules[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("match"), str):
        raise ValueError(f"{where} needs a string 'match'")
    if raw.get("class") not in classes:
        raise ValueError(f"{where}: class {raw.get('class')!r} is not one of {sorted(classes)}")
    try:
        pattern = re.compile(raw["match"])
    except re.error as err:
        raise ValueError(f"{where}: bad regex {raw['match']!r} ({err})") from err
    return Rule(pattern, raw["class"], bool(raw.get("higher_is_better", False)))


def _parse_bits(path: Path, backend: str, value: Any) -> int:
    try:
        return int(value, 0) if isinstance(value, str) else int(value)
    except ValueError as err:
        raise ValueError(f"{path}: benign_throttle_bits.{backend} = {value!r} "
                         f"is not an integer") from err


# --------------------------------------------------------------------------- reading


@dataclass
class RoundData:
    """One case on one side in one round."""

    status: str  # "ok" | "failed" | "skipped"
    samples: list[float] = field(default_factory=list)
    value: float | None = None
    clocks: list[float] | None = None  # MHz per sample, from the per-sample records
    throttle: list[int] = field(default_factory=list)  # raw bits per window
    backend: str = "none"


@dataclass
class Side:
    rounds: list[RoundData | None] = field(default_factory=list)  # None: absent that round

    @property
    def status(self) -> str:
        present = [r for r in self.rounds if r is not None]
        if any(r.status == "failed" for r in present):
            return "failed"
        if len(present) < len(self.rounds):
            return "missing"
        if all(r.status == "skipped" for r in present):
            return "skipped"
        return "ok" if all(r.status == "ok" for r in present) else "mixed"

    def failed_rounds(self) -> list[int]:
        return [i + 1 for i, r in enumerate(self.rounds) if r is not None and r.status == "failed"]

    def _round_samples(self) -> list[list[float]]:
        return [r.samples if r.samples else [r.value] if r.value is not None else []
                for r in self.rounds if r is not None and r.status == "ok"]

    def samples(self) -> list[float]:
        """Pooled samples; a benchmark without samples contributes its value per round."""
        return [x for group in self._round_samples() for x in group]

    def group_sizes(self) -> list[int]:
        """Samples per round, in the order of ``samples()``: rounds are the replicates."""
        return [len(group) for group in self._round_samples() if group]

    def clocks(self) -> list[float] | None:
        out: list[float] = []
        for r in self.rounds:
            if r is None or r.status != "ok":
                continue
            if r.clocks is None or len(r.clocks) != len(r.samples or [r.value]):
                return None
            out.extend(r.clocks)
        return out or None

    def throttle(self) -> list[tuple[str, int]]:
        return [(r.backend, bits) for r in self.rounds if r is not None for bits in r.throttle]

    def values(self) -> list[float]:
        return [r.value for r in self.rounds if r is not None and r.value is not None]


@dataclass(frozen=True)
class CaseId:
    env: str
    name: str  # benchmark(param, ...)


class ResultsFileError(Exception):
    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path


def case_name(benchmark: str, param_values: Sequence[str]) -> str:
    return f"{benchmark}({', '.join(param_values)})" if param_values else benchmark


def read_results_file(path: Path) -> tuple[str, dict[str, RoundData]]:
    """(env name, case name -> RoundData) of one asv results file (format version 2)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise ResultsFileError(path, "file not found") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultsFileError(path, f"not valid JSON ({err})") from err
    if not isinstance(data, dict) or data.get("version") != 2:
        raise ResultsFileError(path, "not an asv results file (format version 2)")
    columns = data.get("result_columns")
    results = data.get("results")
    if not isinstance(columns, list) or not isinstance(results, dict):
        raise ResultsFileError(path, "missing 'result_columns' or 'results'")
    out: dict[str, RoundData] = {}
    for benchmark, row in results.items():
        try:
            out.update(_parse_row(benchmark, dict(zip(columns, row, strict=False))))
        except (TypeError, ValueError, IndexError) as err:
            raise ResultsFileError(path, f"bad row for {benchmark}: {err}") from err
    return str(data.get("env_name", "")), out


def _parse_row(benchmark: str, row: dict[str, Any]) -> dict[str, RoundData]:
    params = row.get("params") or []
    combos = [list(c) for c in itertools.product(*params)] if params else [[]]
    result = row.get("result")
    values = result if isinstance(result, list) else [result] * len(combos)
    samples = row.get("samples") or [None] * len(combos)
    out = {}
    for combo, value, sample in zip(combos, values, samples, strict=True):
        name = case_name(benchmark, combo)
        if value is None:
            out[name] = RoundData("failed")
        elif isinstance(value, float) and math.isnan(value):
            out[name] = RoundData("skipped")
        else:
            out[name] = RoundData("ok", samples=[float(s) for s in sample or []],
                                  value=float(value))
    return out


def read_benchmark_meta(results_dir: Path) -> dict[str, dict[str, Any]]:
    path = results_dir / "benchmarks.json"
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultsFileError(path, f"not valid JSON ({err})") from err
    return {k: v for k, v in meta.items() if isinstance(v, dict)}


def read_round_records(records_dir: Path, commit: str,
                       meta: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[dict]]:
    """(env, case name) -> the records harness.record wrote for it, oldest first: one per
    benchmark process (asv's ``rounds`` > 1 runs several and pools their samples)."""
    out: dict[tuple[str, str], list[dict]] = {}
    if not records_dir.is_dir():
        return out
    for path in sorted(records_dir.rglob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ResultsFileError(path, f"record is not valid JSON ({err})") from err
        if not str(rec.get("commit") or "").startswith(commit[:8]) or "measurement" not in rec:
            continue
        bench = rec.get("benchmark", "")
        names = meta.get(bench, {}).get("param_names", list(rec.get("params", {})))
        try:
            values = [repr(rec["params"][n]) for n in names]
        except KeyError as err:
            raise ResultsFileError(path, f"record lacks parameter {err}") from err
        out.setdefault((str(rec.get("env_name") or ""), case_name(bench, values)), []).append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: float(r.get("recorded_at") or 0.0))
    return out


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-9)
                                    for x, y in zip(a, b, strict=True))


def attach_record(data: RoundData, recs: Sequence[dict]) -> None:
    """Per-sample clocks and throttle bits from the records whose samples make up asv's.

    asv stores each process's samples in the order the benchmark returned them, one
    process after another; records of processes whose samples asv did not keep (an
    earlier run of the same commit) are passed over. Clocks are attached only when every
    sample is accounted for.
    """
    clocks: list[float | None] = []
    throttle: list[int] = []
    backend = "none"
    pos = 0
    while pos < len(data.samples):
        for rec in recs:
            m = rec["measurement"]
            recorded = [float(s) for s in m.get("samples") or []]
            if recorded and _same(recorded, data.samples[pos:pos + len(recorded)]):
                windows = m.get("windows") or []
                backend = str(m.get("telemetry_backend") or "none")
                throttle += [int(w["throttle_bits_or"]) for w in windows
                             if w.get("throttle_bits_or") is not None]
                got = [w.get("sm_clock_mhz_median") for w in windows]
                clocks += got if len(got) == len(recorded) else [None] * len(recorded)
                pos += len(recorded)
                break
        else:
            break  # a sample no record explains: no per-sample clocks for this case
    if pos == 0:
        return
    data.backend, data.throttle = backend, throttle
    if pos == len(data.samples) and clocks and all(c is not None for c in clocks):
        data.clocks = [float(c) for c in clocks]


def results_files(round_dir: Path, machine: str, commit: str, hash_length: int) -> list[Path]:
    return sorted((round_dir / "results" / machine).glob(f"{commit[:hash_length]}-*.json"))


@dataclass
class CaseData:
    base: Side
    head: Side
    unit: str = ""


def collect(round_dirs: Sequence[Path], machine: str, base: str, head: str,
            hash_length: int = 8) -> dict[CaseId, CaseData]:
    """Read every round; a missing or unreadable base file ends the gate with exit 3."""
    cases: dict[CaseId, CaseData] = {}
    n = len(round_dirs)
    for index, round_dir in enumerate(round_dirs):
        meta = read_benchmark_meta(round_dir / "results")
        for which, commit in (("base", base), ("head", head)):
            for env, name, data in _read_side(round_dir, machine, which, commit, hash_length,
                                              meta):
                entry = cases.setdefault(CaseId(env, name), CaseData(
                    Side([None] * n), Side([None] * n),
                    unit=str(meta.get(name.split("(")[0], {}).get("unit", ""))))
                getattr(entry, which).rounds[index] = data
    return cases


def _read_side(round_dir: Path, machine: str, which: str, commit: str, hash_length: int,
               meta: dict[str, dict[str, Any]]) -> list[tuple[str, str, RoundData]]:
    files = results_files(round_dir, machine, commit, hash_length)
    expected = round_dir / "results" / machine / f"{commit[:hash_length]}-<env>.json"
    code = EXIT_INCONCLUSIVE if which == "base" else EXIT_BROKEN
    label = "no baseline" if which == "base" else "no results at head"
    if not files:
        raise GateError(f"{label}: {expected} does not exist ({which} {commit[:12]})", code)
    records = read_round_records(round_dir / "records", commit, meta)
    out = []
    for path in files:
        try:
            env, per_case = read_results_file(path)
        except ResultsFileError as err:
            raise GateError(f"{label}: {err}", code) from err
        for name, data in per_case.items():
            recs = records.get((env, name))
            if recs and data.status == "ok":
                attach_record(data, recs)
            out.append((env, name, data))
    return out


# --------------------------------------------------------------------------- verdicts


@dataclass
class Verdict:
    case: str
    env: str
    klass: str
    verdict: str  # SLOW | FAST | SAME | INCONCLUSIVE
    reason: str = ""
    unit: str = ""
    before: float | None = None
    after: float | None = None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    q_value: float | None = None
    clock_base_mhz: float | None = None
    clock_head_mhz: float | None = None
    cycles_ratio: float | None = None
    n_base: int = 0
    n_head: int = 0
    broke: bool = False
    confirmed: bool | None = None
    higher_is_better: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci"] = list(self.ci) if self.ci else None
        return out


@dataclass
class Tested:
    """A case that reached the statistics: its p-value waits for the suite-wide correction."""

    verdict: Verdict
    time: stats.Comparison
    cycles: stats.Comparison | None
    min_ratio: float

    @property
    def p_case(self) -> float:
        # Intersection-union: a change is claimed only if it holds in time and in cycles.
        return max(self.time.p_value, self.cycles.p_value if self.cycles else 0.0)


def _flip(label: str, higher_is_better: bool) -> str:
    if not higher_is_better:
        return label
    return {"SLOW": "FAST", "FAST": "SLOW"}.get(label, label)


def assess(case: CaseId, data: CaseData, th: Thresholds) -> Verdict | Tested | None:
    """Everything that can be decided per case; None when the case is skipped on both sides."""
    rule, klass = th.rule_for(case.name)
    v = Verdict(case.name, case.env, klass.name, "INCONCLUSIVE", unit=data.unit,
                higher_is_better=rule.higher_is_better)
    bs, hs = data.base.status, data.head.status
    if hs == "failed":
        v.reason, v.broke = f"failed at head (round {data.head.failed_rounds()})", True
        return v
    if bs == "skipped" and hs == "skipped":
        return None
    early = _status_reason(bs, hs, data)
    if early:
        v.reason = early
        return v
    base, head = data.base.samples(), data.head.samples()
    v.before, v.after = statistics.median(base), statistics.median(head)
    v.n_base, v.n_head = len(base), len(head)
    v.ratio = v.after / v.before if v.before else None
    if klass.exact:
        return _assess_exact(v, data)
    if min(len(base), len(head)) < th.min_samples:
        v.reason = f"too few samples (base {len(base)}, head {len(head)}; need {th.min_samples})"
        return v
    throttled = _throttle_reason(data, th)
    if throttled:
        v.reason = throttled
        return v
    return _test(v, data, base, head, th, klass)


def _status_reason(bs: str, hs: str, data: CaseData) -> str:
    if bs == "failed":
        return f"failed at base (round {data.base.failed_rounds()}): no baseline"
    if bs in ("skipped", "missing"):
        return f"{bs} at base: no baseline"
    if hs in ("skipped", "missing"):
        return f"{hs} at head"
    if "mixed" in (bs, hs):
        return "skipped in some rounds and measured in others"
    return ""


def _assess_exact(v: Verdict, data: CaseData) -> Verdict:
    base_vals, head_vals = set(data.base.values()), set(data.head.values())
    if len(base_vals) > 1 or len(head_vals) > 1:
        v.reason = (f"a static figure changed between rounds (base {sorted(base_vals)}, "
                    f"head {sorted(head_vals)})")
        return v
    before, after = base_vals.pop(), head_vals.pop()
    raw = "SAME" if after == before else ("SLOW" if after > before else "FAST")
    v.verdict = _flip(raw, v.higher_is_better)
    v.reason = "static figure: exact comparison" if raw != "SAME" else ""
    return v


def _throttle_reason(data: CaseData, th: Thresholds) -> str:
    """Throttling beyond the normal state under load makes a comparison unreliable.

    A bit that is set in every window of both sides (a sensor stuck on, as some AMD
    boards report TEMP_HOTSPOT at idle) affects both sides alike and is not a reason.
    """
    per_side = {}
    for which in ("base", "head"):
        side: Side = getattr(data, which)
        per_side[which] = [bits & ~th.benign_bits.get(backend, 0)
                           for backend, bits in side.throttle()]
    every = per_side["base"] + per_side["head"]
    if not any(every) or len(set(every)) == 1:
        return ""
    seen = {w: hex(_or(bits)) for w, bits in per_side.items() if any(bits)}
    return "throttle bits set: " + ", ".join(f"{w} {b}" for w, b in seen.items())


def _or(values: Sequence[int]) -> int:
    out = 0
    for v in values:
        out |= v
    return out


def _test(v: Verdict, data: CaseData, base: list[float], head: list[float], th: Thresholds,
          klass: KernelClass) -> Tested:
    groups = {"base_groups": data.base.group_sizes(), "head_groups": data.head.group_sizes()}
    time_cmp = stats.compare(base, head, th.ci_level, **groups)
    v.ci, v.p_value = (time_cmp.ci_low, time_cmp.ci_high), time_cmp.p_value
    cycles = None
    base_clk, head_clk = data.base.clocks(), data.head.clocks()
    if base_clk and head_clk:
        v.clock_base_mhz = statistics.median(base_clk)
        v.clock_head_mhz = statistics.median(head_clk)
        if abs(v.clock_head_mhz / v.clock_base_mhz - 1.0) > th.clock_tolerance:
            cycles = stats.compare(stats.to_cycles(base, base_clk),
                                   stats.to_cycles(head, head_clk), th.ci_level, **groups)
            v.cycles_ratio = cycles.ratio
    return Tested(v, time_cmp, cycles, klass.min_ratio)


def finish(tested: Tested, q_value: float, alpha: float) -> Verdict:
    v = tested.verdict
    v.q_value = q_value
    time_label = stats.label(tested.time, q_value, tested.min_ratio, alpha)
    if tested.cycles is None:
        _apply(v, time_label, "")
        return v
    cycle_label = stats.label(tested.cycles, q_value, tested.min_ratio, alpha)
    clocks = f"clocks differed (base {v.clock_base_mhz:.0f} MHz, head {v.clock_head_mhz:.0f} MHz)"
    if time_label == cycle_label and time_label != "NOISY":
        _apply(v, time_label, f"{clocks}; holds in cycles (x{tested.cycles.ratio:.3f})")
        return v
    v.verdict = "INCONCLUSIVE"
    if cycle_label in ("SAME", "NOISY") and _outside_band(tested.time, tested.min_ratio):
        why = "the change does not hold in cycles"
    elif time_label == cycle_label:
        why = "too noisy in both time and cycles"
    else:
        why = "time and cycles disagree"
    v.reason = (f"{clocks}: time {_fmt_cmp(tested.time)}, cycles {_fmt_cmp(tested.cycles)}"
                f"; {why}")
    return v


def _outside_band(c: stats.Comparison, min_ratio: float) -> bool:
    """The whole interval lies beyond the class threshold: a clear change in this quantity."""
    return c.ci_low > 1.0 + min_ratio or c.ci_high < 1.0 / (1.0 + min_ratio)


def _fmt_cmp(c: stats.Comparison) -> str:
    return f"x{c.ratio:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"


def _apply(v: Verdict, label: str, note: str) -> None:
    if label == "NOISY":
        lo, hi = v.ci or (math.nan, math.nan)
        v.verdict = "INCONCLUSIVE"
        v.reason = (f"too noisy: interval [{lo:.3f}, {hi:.3f}] reaches past the {v.klass} "
                    f"threshold" + (f"; {note}" if note else ""))
        return
    v.verdict = _flip(label, v.higher_is_better)
    v.reason = note


def decide(cases: dict[CaseId, CaseData], th: Thresholds) -> list[Verdict]:
    """Per-case assessment, then the suite-wide correction over every tested case."""
    done: list[Verdict] = []
    tested: list[Tested] = []
    for case in sorted(cases, key=lambda c: (c.env, c.name)):
        out = assess(case, cases[case], th)
        if isinstance(out, Tested):
            tested.append(out)
        elif out is not None:
            done.append(out)
    q_values = stats.adjust([t.p_case for t in tested], th.correction)
    done += [finish(t, q, th.alpha) for t, q in zip(tested, q_values, strict=True)]
    return done


def candidates(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Statistical SLOW/FAST verdicts: they are re-measured before they are final."""
    return [v for v in verdicts if v.verdict in ("SLOW", "FAST") and v.klass != "static"
            and v.p_value is not None]


def confirm(first: list[Verdict], cases: dict[CaseId, CaseData],
            extra: dict[CaseId, CaseData], th: Thresholds) -> list[Verdict]:
    """Final verdicts after the re-measure round ``extra``.

    A candidate keeps its verdict only if the pooled samples (all rounds plus the
    re-measure) still give it, and the re-measure on its own moved the same way by at
    least the class threshold (in cycles too where the clocks differed).
    """
    flagged = {CaseId(v.env, v.case): v.verdict for v in candidates(first)}
    if not flagged:
        return first
    pooled = dict(cases)
    for cid in flagged:
        if cid in extra:
            pooled[cid] = CaseData(Side(cases[cid].base.rounds + extra[cid].base.rounds),
                                   Side(cases[cid].head.rounds + extra[cid].head.rounds),
                                   cases[cid].unit)
    final = decide(pooled, th)
    for v in final:
        cid = CaseId(v.env, v.case)
        if cid not in flagged:
            continue
        alone = _remeasure_label(extra.get(cid), th, v)
        if v.verdict == flagged[cid] and alone == flagged[cid]:
            v.confirmed = True
            continue
        first_ratio = next(f.ratio for f in first if CaseId(f.env, f.case) == cid)
        v.confirmed = False
        v.reason = (f"flagged {flagged[cid]} (x{first_ratio:.3f}) but not confirmed by the "
                    f"re-measure ({alone}); pooled: {v.verdict}")
        v.verdict = "INCONCLUSIVE"
    return final


def _remeasure_label(data: CaseData | None, th: Thresholds, pooled: Verdict) -> str:
    if data is None or data.base.status != "ok" or data.head.status != "ok":
        return "re-measure missing or failed"
    base, head = data.base.samples(), data.head.samples()
    ratios = [statistics.median(head) / statistics.median(base)]
    base_clk, head_clk = data.base.clocks(), data.head.clocks()
    if pooled.cycles_ratio is not None and base_clk and head_clk:
        ratios.append(statistics.median(stats.to_cycles(head, head_clk))
                      / statistics.median(stats.to_cycles(base, base_clk)))
    _, klass = th.rule_for(pooled.case)
    up = 1.0 + klass.min_ratio
    if all(r >= up for r in ratios):
        raw = "SLOW"
    elif all(r <= 1.0 / up for r in ratios):
        raw = "FAST"
    else:
        return "moved " + ", ".join(f"x{r:.3f}" for r in ratios)
    return _flip(raw, pooled.higher_is_better)


def exit_code(verdicts: Sequence[Verdict]) -> int:
    if any(v.broke for v in verdicts):
        return EXIT_BROKEN
    if any(v.verdict == "SLOW" for v in verdicts):
        return EXIT_REGRESSION
    if any(v.verdict == "INCONCLUSIVE" for v in verdicts):
        return EXIT_INCONCLUSIVE
    return EXIT_PASS


# --------------------------------------------------------------------------- reports

_ORDER = {"SLOW": 0, "INCONCLUSIVE": 1, "SAME": 2, "FAST": 3}
_STATUS = {EXIT_PASS: "PASS", EXIT_REGRESSION: "REGRESSION", EXIT_BROKEN: "BROKEN",
           EXIT_INCONCLUSIVE: "INCONCLUSIVE"}


def worst_first(verdicts: Sequence[Verdict]) -> list[Verdict]:
    def key(v: Verdict) -> tuple:
        badness = v.ratio if v.ratio is not None else 0.0
        if v.higher_is_better and v.ratio:
            badness = 1.0 / v.ratio
        return (_ORDER[v.verdict], not v.broke, -badness, v.case)

    return sorted(verdicts, key=key)


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "seconds":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= scale or name == "ns":
                return f"{value / scale:.3g} {name}"
    if float(value).is_integer():
        return f"{int(value)} {unit}".strip()
    return f"{value:.4g} {unit}".strip()


def _fmt_ratio(v: Verdict) -> str:
    if v.ratio is None:
        return "—"
    text = f"{v.ratio:.3f}x"
    if v.ci:
        text += f" [{v.ci[0]:.3f}, {v.ci[1]:.3f}]"
    return text


def _fmt_clocks(v: Verdict) -> str:
    if v.clock_base_mhz is None or v.clock_head_mhz is None:
        return "—"
    return f"{v.clock_base_mhz:.0f} → {v.clock_head_mhz:.0f} MHz"


def _fmt_verdict(v: Verdict) -> str:
    text = f"**{v.verdict}**"
    return f"{text}: {v.reason}" if v.reason else text


def summary_line(verdicts: Sequence[Verdict], code: int) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in _ORDER}
    broke = sum(v.broke for v in verdicts)
    parts = [f"{counts['SLOW']} slower", f"{counts['FAST']} faster", f"{counts['SAME']} same",
             f"{counts['INCONCLUSIVE']} inconclusive"]
    if broke:
        parts.append(f"{broke} broken")
    return f"**{_STATUS[code]}** (exit {code}): " + ", ".join(parts) + f" of {len(verdicts)} cases"


def markdown(verdicts: Sequence[Verdict], code: int, info: dict[str, Any],
             max_rows: int = 60) -> str:
    title = f"### Performance gate{' — ' + info['label'] if info.get('label') else ''}"
    lines = [COMMENT_MARKER, title, "", summary_line(verdicts, code), "",
             f"base `{info['base'][:10]}` ({info['base_how']}) → head `{info['head'][:10]}` on "
             f"`{info['machine']}`; {info['rounds']} interleaved rounds"
             f"{' + 1 re-measure of flagged cases' if info.get('remeasured') else ''}; "
             f"false alarms controlled across all {info['tested']} tested cases "
             f"({info['correction']}, alpha {info['alpha']}).", ""]
    lines += table_lines(verdicts, bool(info.get("multi_env")), max_rows)
    return "\n".join(lines) + "\n"


def table_lines(verdicts: Sequence[Verdict], multi_env: bool, max_rows: int = 60,
                json_name: str = "gate.json") -> list[str]:
    """The verdict table of a report, worst case first (shared with tools/stackcmp.py)."""
    lines = ["| case | before | after | ratio [CI] | clocks | verdict |",
             "|---|---|---|---|---|---|"]
    rows = worst_first(verdicts)
    for v in rows[:max_rows]:
        name = f"{v.case} [{v.env}]" if multi_env else v.case
        lines.append(f"| `{name}` | {fmt_value(v.before, v.unit)} | {fmt_value(v.after, v.unit)} "
                     f"| {_fmt_ratio(v)} | {_fmt_clocks(v)} | {_fmt_verdict(v)} |")
    if len(rows) > max_rows:
        lines.append(f"\n… and {len(rows) - max_rows} more rows in {json_name}.")
    return lines


def report_json(verdicts: Sequence[Verdict], code: int, info: dict[str, Any]) -> dict[str, Any]:
    return {"schema": REPORT_SCHEMA, "exit_code": code, "status": _STATUS[code],
            "summary": summary_line(verdicts, code), **info,
            "cases": [v.as_dict() for v in worst_first(verdicts)]}


# --------------------------------------------------------------------------- running asv


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if out.returncode != 0:
        raise GateError(f"git {' '.join(args)} failed: {out.stderr.strip()}", EXIT_INCONCLUSIVE)
    return out.stdout.strip()


def resolve_base(repo: Path, head: str, base: str | None, main_branch: str) -> tuple[str, str]:
    """(sha, how it was chosen). Default: merge-base of head with the main branch."""
    if base:
        return git(repo, "rev-parse", f"{base}^{{commit}}"), f"given as {base}"
    for ref in (f"origin/{main_branch}", main_branch):
        probe = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=repo,
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return git(repo, "merge-base", head, ref), f"merge-base with {ref}"
    raise GateError(f"no baseline: neither origin/{main_branch} nor {main_branch} exists in "
                    f"{repo}; pass --base", EXIT_INCONCLUSIVE)


def load_project_conf(path: Path) -> dict[str, Any]:
    from asv import util

    try:
        return util.load_json(str(path), js_comments=True)
    except Exception as err:
        raise GateError(f"{path}: cannot read asv config ({err})", EXIT_INCONCLUSIVE) from err


def derived_config(conf: dict[str, Any], repo: Path, round_dir: Path) -> dict[str, Any]:
    """The project's asv config with the results and site moved into the PR directory.

    asv resolves paths against the config's folder, so every path becomes absolute and
    ``{conf_dir}`` in commands points at the repository. Environments stay shared.
    """
    out = dict(conf)
    repo_url = str(conf.get("repo", "."))
    if "://" not in repo_url:
        out["repo"] = str((repo / repo_url).resolve())
    for key, default in (("env_dir", "env"), ("benchmark_dir", "benchmarks")):
        out[key] = str((repo / conf.get(key, default)).resolve())
    out["results_dir"] = str(round_dir / "results")
    out["html_dir"] = str(round_dir / "html")
    for key in ("build_command", "install_command", "uninstall_command"):
        if key in conf:
            out[key] = [c.replace("{conf_dir}", str(repo)) for c in conf[key]]
    return out


def guard_results_dir(pr_dir: Path, conf: dict[str, Any], repo: Path) -> None:
    published = (repo / conf.get("results_dir", "results")).resolve()
    if pr_dir.resolve() == published or published in pr_dir.resolve().parents \
            or pr_dir.resolve() in published.parents:
        raise GateError(f"--pr-dir {pr_dir} overlaps the published results {published}; "
                        f"PR results must never enter the history", EXIT_INCONCLUSIVE)


@dataclass
class RunSettings:
    repo: Path
    conf: dict[str, Any]
    machine: str
    pr_dir: Path
    benches: list[str]
    cpu_only: bool
    show_stderr: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. one GPU's visibility
    log_path: Path | None = None  # asv's output goes here instead of the console


def run_round(settings: RunSettings, name: str, order: Sequence[str],
              benches: Sequence[str] | None = None) -> dict[str, int]:
    """One interleaved round: each commit in ``order`` once, one process per benchmark."""
    from tools.asvrun import asv_env, run_asv

    round_dir = settings.pr_dir / name
    round_dir.mkdir(parents=True, exist_ok=True)
    conf_path = round_dir / "asv.conf.json"
    conf_path.write_text(json.dumps(derived_config(settings.conf, settings.repo, round_dir),
                                    indent=2))
    env = asv_env(settings.machine, settings.repo, cpu_only=settings.cpu_only)
    env["KPERF_RECORD_DIR"] = str(round_dir / "records")  # per-round records: no overwrites
    env.update(settings.extra_env)
    codes = {}
    for sha in order:
        args = ["--config", str(conf_path), "run", f"{sha}^!", "--machine", settings.machine,
                "--record-samples", "-a", "rounds=1"]
        if settings.show_stderr:
            args.append("--show-stderr")
        for regex in benches if benches is not None else settings.benches:
            args += ["-b", regex]
        codes[sha] = run_asv(args, env, settings.repo, log=settings.log_path).returncode
    return codes


def bench_regex_for(verdicts: Sequence[Verdict]) -> list[str]:
    """asv matches ``-b`` against ``name(param, ...)``: the re-measure runs just these cases."""
    names = sorted({v.case for v in verdicts})
    return ["^(" + "|".join(re.escape(n) for n in names) + ")$"]


def ensure_machine(name: str | None) -> str:
    from tools import machine as machine_tool

    if name:
        path = machine_tool.machine_file()
        if path.exists() and name in json.loads(path.read_text()):
            return name
    info = machine_tool.describe(name)
    machine_tool.write_machine_file(info)
    return info["machine"]


# --------------------------------------------------------------------------- main


def round_dirs(pr_dir: Path) -> list[Path]:
    return sorted(p for p in pr_dir.glob("round-*") if p.is_dir())


def analyse(pr_dir: Path, state: dict[str, Any], th: Thresholds) -> list[Verdict]:
    rounds = round_dirs(pr_dir)
    if not rounds:
        raise GateError(f"no baseline: no round-* folders under {pr_dir}", EXIT_INCONCLUSIVE)
    hash_length = int(state.get("hash_length", 8))
    args = (state["machine"], state["base"], state["head"], hash_length)
    cases = collect(rounds, *args)
    verdicts = decide(cases, th)
    confirm_dir = pr_dir / "confirm"
    if confirm_dir.is_dir() and candidates(verdicts):
        extra = collect([confirm_dir], *args)
        verdicts = confirm(verdicts, cases, extra, th)
    return verdicts


def measure_rounds(settings: RunSettings, state: dict[str, Any], rounds: int) -> None:
    """The interleaved rounds, without the re-measure (tools/shard.py runs one per GPU)."""
    base, head = state["base"], state["head"]
    for r in range(1, rounds + 1):
        order = (base, head) if r % 2 else (head, base)  # A B, B A, ...: linear drift cancels
        state["asv_exit"][f"round-{r:02d}"] = run_round(settings, f"round-{r:02d}", order)
        write_state(settings.pr_dir, state)


def remeasure(settings: RunSettings, state: dict[str, Any], flagged: Sequence[Verdict],
              rounds: int) -> None:
    """The one re-measure round of flagged cases, in the order that continues the rounds."""
    base, head = state["base"], state["head"]
    order = (base, head) if (rounds + 1) % 2 else (head, base)
    state["asv_exit"]["confirm"] = run_round(settings, "confirm", order, bench_regex_for(flagged))
    state["remeasured"] = True
    write_state(settings.pr_dir, state)


def measure(settings: RunSettings, state: dict[str, Any], th: Thresholds, rounds: int) -> None:
    measure_rounds(settings, state, rounds)
    try:
        first = analyse(settings.pr_dir, state, th)
    except GateError:
        return  # the analysis after measuring reports it with its exit code
    flagged = candidates(first)
    if flagged:
        print(f"re-measuring {len(flagged)} flagged case(s) once", flush=True)
        remeasure(settings, state, flagged, rounds)


def write_state(pr_dir: Path, state: dict[str, Any]) -> None:
    (pr_dir / "gate-state.json").write_text(json.dumps(state, indent=1, sort_keys=True))


def read_state(pr_dir: Path) -> dict[str, Any]:
    path = pr_dir / "gate-state.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as err:
        raise GateError(f"no baseline: {path} does not exist (run the gate without --no-run "
                        f"first)", EXIT_INCONCLUSIVE) from err
    except json.JSONDecodeError as err:
        raise GateError(f"{path}: not valid JSON ({err})", EXIT_INCONCLUSIVE) from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.gate", description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Exit codes"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (cwd)")
    parser.add_argument("--config", type=Path, help="asv config (default <repo>/asv.conf.json)")
    parser.add_argument("--machine", help="asv machine name (default: described from this host)")
    add_gate_options(parser)
    return parser


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """What to compare and how: shared with ``python -m tools.shard gate``."""
    parser.add_argument("--thresholds", type=Path, help="default <repo>/thresholds.json")
    parser.add_argument("--head", default="HEAD", help="head revision (default HEAD)")
    parser.add_argument("--base", help="base revision (default: merge-base of head and main)")
    parser.add_argument("--main-branch", help="default: the first of asv.conf.json 'branches'")
    parser.add_argument("-b", "--bench", action="append", help="asv benchmark regex (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--pr-dir", type=Path, help="default <repo>/.asv/pr-results")
    parser.add_argument("--out", type=Path, help="report folder (default: the PR directory)")
    parser.add_argument("--label", default="", help="runner label shown in the report title")
    parser.add_argument("--no-run", action="store_true", help="only analyse the last run")
    parser.add_argument("--max-rows", type=int, default=60)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    repo = args.repo.resolve()
    pr_dir = (args.pr_dir or repo / ".asv" / "pr-results").resolve()
    out_dir = (args.out or pr_dir).resolve()
    try:
        th = Thresholds.load(args.thresholds or repo / "thresholds.json")
        state = _prepare(args, repo, pr_dir, th)
        verdicts = analyse(pr_dir, state, th)
    except (GateError, ValueError) as err:
        code = err.exit_code if isinstance(err, GateError) else EXIT_INCONCLUSIVE
        print(f"gate: {err}", file=sys.stderr)
        _write_failure(out_dir, str(err), code, args.label)
        return code
    code = exit_code(verdicts)
    info = {"label": args.label, "base": state["base"], "head": state["head"],
            "base_how": state["base_how"], "machine": state["machine"],
            "rounds": len(round_dirs(pr_dir)), "remeasured": state.get("remeasured", False),
            "tested": sum(v.q_value is not None for v in verdicts),
            "correction": {"bh": "Benjamini-Hochberg", "holm": "Holm"}[th.correction],
            "alpha": th.alpha, "thresholds": str(th.path),
            "multi_env": len({v.env for v in verdicts}) > 1}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gate.md").write_text(markdown(verdicts, code, info, args.max_rows))
    (out_dir / "gate.json").write_text(json.dumps(report_json(verdicts, code, info), indent=1))
    print(markdown(verdicts, code, info, args.max_rows))
    print(f"gate: exit {code}; report {out_dir / 'gate.md'}, {out_dir / 'gate.json'}")
    return code


def pr_subset(thresholds_path: Path) -> list[str]:
    """The benchmarks a PR is gated on by default: ``pr_subset`` of the thresholds file."""
    subset = json.loads(thresholds_path.read_text()).get("pr_subset", [])
    if not isinstance(subset, list) or not all(isinstance(r, str) for r in subset):
        raise GateError(f"{thresholds_path}: 'pr_subset' must be a list of regex strings",
                        EXIT_INCONCLUSIVE)
    for regex in subset:
        try:
            re.compile(regex)
        except re.error as err:
            raise GateError(f"{thresholds_path}: pr_subset regex {regex!r}: {err}",
                            EXIT_INCONCLUSIVE) from err
    return subset


def _prepare(args: argparse.Namespace, repo: Path, pr_dir: Path, th: Thresholds) -> dict:
    if args.no_run:
        return read_state(pr_dir)
    conf_path = args.config or repo / "asv.conf.json"
    conf = load_project_conf(conf_path)
    guard_results_dir(pr_dir, conf, repo)
    head = git(repo, "rev-parse", f"{args.head}^{{commit}}")
    main_branch = args.main_branch or (conf.get("branches") or ["main"])[0]
    base, how = resolve_base(repo, head, args.base, main_branch)
    benches, cpu_only = args.bench or [], False
    if not benches:
        from tools.asvrun import CPU_SUITES, has_gpu

        cpu_only = not has_gpu()
        benches = [CPU_SUITES] if cpu_only else pr_subset(th.path)
    machine = ensure_machine(args.machine)
    if pr_dir.exists():
        shutil.rmtree(pr_dir)  # the gate's own scratch: every run starts clean
    pr_dir.mkdir(parents=True)
    state = {"base": base, "head": head, "base_how": how, "machine": machine,
             "hash_length": int(conf.get("hash_length", 8)), "asv_exit": {},
             "benches": benches, "remeasured": False}
    write_state(pr_dir, state)
    settings = RunSettings(repo, conf, machine, pr_dir, benches, cpu_only)
    measure(settings, state, th, max(1, args.rounds))
    return state


def _write_failure(out_dir: Path, message: str, code: int, label: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"### Performance gate{' — ' + label if label else ''}"
    (out_dir / "gate.md").write_text(f"{COMMENT_MARKER}\n{title}\n\n**{_STATUS[code]}** "
                                     f"(exit {code}): {message}\n")
    (out_dir / "gate.json").write_text(json.dumps(
        {"schema": REPORT_SCHEMA, "exit_code": code, "status": _STATUS[code], "error": message,
         "label": label, "cases": []}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
