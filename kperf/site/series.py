"""The history's series and their ``regressions_thresholds`` entries: every series asv
discovers in ``benchmarks/`` with its class (thresholds.json's rules) and threshold, and
one regex per group of series sharing a threshold, checked against asv's own matching."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kperf.config import ConfigError
from kperf.gate.asvio import BRANCH_SUFFIX, asv_threshold
from kperf.gate.config import KernelClass, Thresholds
from kperf.site.spreads import History

ENERGY = re.compile(r"^(bench_\w+)\.(\w+)Energy\.track_energy$")
TIME = re.compile(r"^bench_\w+\.\w+Time\.track_time$")


@dataclass(frozen=True)
class Series:
    benchmark: str
    params: tuple[str, ...]  # asv's repr of each parameter value
    klass: str
    measure: str  # "time" | "energy" | "" (a figure of a class without a history spread)
    threshold: float  # what asv gives it
    class_threshold: float = -1.0  # its class's (-1: the same as ``threshold``)

    @property
    def own(self) -> bool:
        """Its threshold is its own (a series of two levels), not its class's."""
        return self.class_threshold >= 0 and self.threshold != self.class_threshold

    @property
    def name(self) -> str:
        """As asv names it (and the gate: ``kperf.gate.asvio.case_name``)."""
        return f"{self.benchmark}({', '.join(self.params)})" if self.params else self.benchmark


def discover(benchmark_dir: Path) -> list[dict[str, Any]]:
    """asv's own discovery of the suite (its ``benchmark.py discover``, run by this Python:
    it reads names and parameters only, and touches no GPU)."""
    from asv.runner import BENCHMARK_RUN_SCRIPT

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "benchmarks.json"
        proc = subprocess.run([sys.executable, BENCHMARK_RUN_SCRIPT, "discover",
                               str(benchmark_dir.resolve()), str(out)],
                              capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"asv's discovery of {benchmark_dir} failed "
                               f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def series_of(benchmarks: Sequence[dict[str, Any]], gate: Thresholds,
              history: History) -> list[Series]:
    """Every series of the discovered suite with its class, measure and threshold."""
    import itertools

    out = []
    for bench in benchmarks:
        name = bench["name"]
        combos = list(itertools.product(*bench["params"])) if bench["params"] else [()]
        for combo in combos:
            klass, measure = _class_of(name, tuple(combo), gate, history)
            series = f"{name}({', '.join(combo)})" if combo else name
            out.append(Series(name, tuple(combo), klass.name, measure,
                              history.series_threshold(series, klass, measure),
                              history.threshold(klass, measure)))
    return out


def _class_of(name: str, params: tuple[str, ...], gate: Thresholds,
              history: History) -> tuple[KernelClass, str]:
    klass, energy = series_class(f"{name}({', '.join(params)})" if params else name, gate)
    measured = (klass.name, "time") in history.spreads
    if (energy or TIME.match(name)) and not measured and not klass.exact:
        raise ConfigError(history.path, f"class {klass.name!r} (of {name}) has no entry: "
                                        "a timed class needs its run-to-run spread here",
                          f"/classes/{klass.name}")
    return klass, ("energy" if energy else "time") if measured else ""


def series_class(series: str, gate: Thresholds) -> tuple[KernelClass, bool]:
    """(class, whether energy per call) of a series named as asv names it: the gate's rule
    for it, or for its Time twin where it is an Energy series."""
    bench, sep, rest = series.partition("(")
    energy = ENERGY.match(bench)
    twin = f"{energy.group(1)}.{energy.group(2)}Time.track_time" if energy else bench
    return gate.rule_for(twin + sep + rest)[1], bool(energy)


def threshold_of(series: str, gate: Thresholds, history: History) -> float:
    """The history threshold of one series (named as asv names it, without ``@branch``):
    what ``kperf publish`` gives it (its class's; its own where it has two levels)."""
    klass, energy = series_class(series, gate)
    measure = "energy" if energy else "time"
    if (klass.name, measure) not in history.spreads:
        measure = ""
    return history.series_threshold(series, klass, measure)


# --------------------------------------------------------------------------- regexes


@dataclass(frozen=True)
class Entry:
    regex: str
    threshold: float
    label: str  # what it covers, for the comment beside it


def _esc(text: str) -> str:
    """A literal for a regex, escaping only what a regex treats specially."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text)


def _label(group: Sequence[Series]) -> str:
    counts = Counter(f"{s.klass} {s.measure}".strip() + (", two levels" if s.own else "")
                     for s in group)
    return ", ".join(f"{what}: {n} series" for what, n in sorted(counts.items()))


def entries_of(series: Sequence[Series]) -> list[Entry]:
    """One regex per group of series sharing a threshold, so that each series matches one
    entry: whole benchmarks of one method and threshold together; a benchmark whose
    cases differ (decode-sized cases of a GEMM) split by its first parameter. A series of
    two levels matches its class's entry and one of its own with its larger threshold
    (asv takes the largest)."""
    own = [s for s in series if s.own]
    series = [replace(s, threshold=s.class_threshold) if s.own else s for s in series]
    by_bench: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        by_bench[s.benchmark].append(s)
    whole: dict[tuple[str, float], list[Series]] = defaultdict(list)
    out: list[Entry] = []
    for bench, group in by_bench.items():
        if len({s.threshold for s in group}) == 1:
            first = group[0]
            whole[(bench.rsplit(".", 1)[1], first.threshold)].extend(group)
        else:
            out += _split_by_case(bench, group)
    for (method, threshold), group in whole.items():
        out.append(Entry(_whole_regex(method, group, series), threshold, _label(group)))
    out += [Entry(f"^{_esc(s.name)}(?:@|$)", s.threshold, _label([s])) for s in own]
    order = {"time": 0, "energy": 1, "": 2}
    return sorted(out, key=lambda e: (order[_measure_of(e, series)], e.threshold, e.regex))


def _one(options: Sequence[str]) -> str:
    return options[0] if len(options) == 1 else f"(?:{'|'.join(options)})"


def _whole_regex(method: str, group: Sequence[Series], series: Sequence[Series]) -> str:
    """Whole benchmarks of one method: by the last word of their suite's name where that
    picks out exactly these series (``\\w+Compile``), else each benchmark named."""
    tail = f"\\.{_esc(method)}" + (r"\(" if group[0].params else "(?:@|$)")
    words = sorted({re.findall(r"[A-Z][a-z0-9]*", s.benchmark.split(".")[1])[-1]
                    for s in group})
    generic = f"^bench_\\w+\\.\\w+{_one(words)}{tail}"
    members = {s.name for s in group}
    if {s.name for s in series if re.match(generic, s.name + BRANCH_SUFFIX)} == members:
        return generic
    prefixes = sorted({_esc(s.benchmark.rsplit(".", 1)[0]) for s in group})
    return f"^{_one(prefixes)}{tail}"


def _measure_of(entry: Entry, series: Sequence[Series]) -> str:
    return next(s.measure for s in series if re.match(entry.regex, s.name + BRANCH_SUFFIX))


def _split_by_case(bench: str, group: Sequence[Series]) -> list[Entry]:
    by_case: dict[str, set[float]] = defaultdict(set)
    for s in group:
        by_case[s.params[0]].add(s.threshold)
    mixed = sorted(c for c, ts in by_case.items() if len(ts) > 1)
    if mixed:
        raise ValueError(f"{bench}: the threshold of case {mixed[0]} depends on more than its "
                         "first parameter; kperf/history/history_thresholds.py cannot write that")
    sep = ", " if len(group[0].params) > 1 else r"\)"
    groups: dict[float, list[Series]] = defaultdict(list)
    for s in group:
        groups[s.threshold].append(s)
    ranked = sorted(groups.values(), key=lambda g: (-len(g), g[0].threshold))
    head = f"^{_esc(bench)}\\("
    out = []
    for rank, members in enumerate(ranked):
        cases = "|".join(_esc(c) for c in sorted({s.params[0] for s in members}))
        if rank == 0:  # the most: every case but the others'
            others = "|".join(_esc(c) for c in sorted(
                {s.params[0] for g in ranked[1:] for s in g}))
            regex = f"{head}(?!(?:{others}){sep})"
        else:
            regex = f"{head}(?:{cases}){sep}"
        out.append(Entry(regex, members[0].threshold, _label(members)))
    return out


def check_entries(entries: Sequence[Entry], series: Sequence[Series]) -> list[str]:
    """Series whose threshold asv would not take from these entries, each with why."""
    table = {e.regex: e.threshold for e in entries}
    return [f"{s.name}: asv would take {got}, its class gives {s.threshold}"
            for s in series if (got := asv_threshold(table, s.name)) != s.threshold]


def regressions_thresholds(root: Path, gate: Thresholds, history: History) -> dict[str, float]:
    """asv's ``regressions_thresholds`` for the project at ``root``: one regex a group of
    series, from each series' class (thresholds.json's rules, else what its op declares)
    and that class's history threshold (history-thresholds.json). Computed when the site
    is published, so an op added to the project needs no file written again."""
    entries = entries_of(series_of(discover(root / "benchmarks"), gate, history))
    return {e.regex: e.threshold for e in entries}
