"""Studies behind the history's thresholds (docs/site.md, "Regression thresholds of the
history"): how often asv's step detection flags steps of a class's size in histories of its
noise, and how the rule does on A/A series held back from it. Not installed: a maintainer's
tool.

    python -m tools.lab.thresholds_study simulate bandwidth [--sizes 1 2]
    python -m tools.lab.thresholds_study held-back [PARTS] [--from-data FILE ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf import project
from kperf.config import ConfigError
from kperf.gate.config import Thresholds
from kperf.history.aadata import load_pairs, quantile, tail_quantile, used_pairs
from kperf.history.history_thresholds import percent
from kperf.site.spreads import History, Spread


@dataclass(frozen=True)
class HeldBack:
    """One class and measure validated on pairs held back from its thresholds."""

    klass: str
    measure: str
    pairs: int  # held-back pairs judged (every fold's)
    flagged: int  # of them past the threshold computed without them
    thresholds: tuple[float, ...]  # each fold's

    @property
    def rate(self) -> float:
        return self.flagged / self.pairs if self.pairs else 0.0


def held_back(repo: Path, raw: dict[str, Any], files: Sequence[str], gate: Thresholds,
              folds: int = 2) -> list[HeldBack]:
    """How often the history's rule flags an unchanged series it was not computed from:
    the A/A data's series split into ``folds`` parts (by a hash of the name, so a series
    is never on both sides), each part's pairs judged against thresholds computed by the
    same rule (``History.threshold``) from the other parts; a pair counts in its worse
    order, as ``figures`` counts it. Classes whose only data falls in one part are left
    out of that fold."""
    import hashlib

    pairs = [(p, placed) for p, placed in load_pairs(repo, files)
             if p.series not in raw.get("two_level", {})]
    part = {p.series: int(hashlib.sha256(p.series.encode()).hexdigest(), 16) % folds
            for p, _ in pairs}
    found: dict[tuple[str, str], list[Any]] = {}
    for k in range(folds):
        train = used_pairs([(p, pl) for p, pl in pairs if part[p.series] != k], gate)
        test = used_pairs([(p, pl) for p, pl in pairs if part[p.series] == k], gate)
        spreads = {key: Spread(statistics.median(p.both_ways for p in mine), "fold",
                               quantile([p.both_ways for p in mine], tail_quantile(raw)))
                   for key, mine in train.items()}
        history = History(repo / "history-thresholds.json", float(raw["factor"]),
                          float(raw["step"]), spreads, float(raw.get("tail_factor", 0.0)), {})
        for (name, measure), judged in test.items():
            if (name, measure) not in spreads:
                continue
            threshold = history.threshold(gate.classes[name], measure)
            row = found.setdefault((name, measure), [0, 0, []])
            row[0] += len(judged)
            row[1] += sum(p.both_ways > threshold for p in judged)
            row[2].append(threshold)
    return [HeldBack(name, measure, n, hit, tuple(ths))
            for (name, measure), (n, hit, ths) in sorted(found.items())]


def detection(threshold: float, sd: float, commits: int, step: float, draws: int = 200,
              seed: int = 1) -> float:
    """How often asv's own step detection (``detect_steps``, ``detect_regressions``) flags
    a history of ``commits`` runs, each off its level by a normal ``sd``, whose level
    rises by ``step`` halfway (0: an unchanged series: the false-flag rate)."""
    import random

    from asv.step_detect import detect_regressions, detect_steps

    rnd, found = random.Random(seed), 0
    for _ in range(draws):
        y = [1.0 + rnd.gauss(0.0, sd) + (step if i >= commits // 2 else 0.0)
             for i in range(commits)]
        found += bool(detect_regressions(detect_steps(y), threshold)[2])
    return found / draws


def simulation_table(history: History, gate: Thresholds, klass: str = "bandwidth",
                     draws: int = 200, sizes: Sequence[float] = ()) -> str:
    """asv's detection of steps of 1.2, 2 and 3 thresholds (and of each of ``sizes``, as
    fractions), and of no step, in histories of a class's run-to-run noise (a run's sd from
    its spread: median |ratio - 1| of two runs is 0.954 sd). ``klass``: CLASS or
    CLASS.MEASURE (time by default)."""
    name, _, measure = klass.partition(".")
    measure = measure or "time"
    if name not in gate.classes or (name, measure) not in history.spreads:
        known = sorted(f"{c}.{m}" for c, m in history.spreads)
        raise ValueError(f"simulate {klass}: no spread of that class and measure in "
                         f"{history.path}; known: {', '.join(known)}")
    threshold = history.threshold(gate.classes[name], measure)
    sd = history.spreads[(name, measure)].value / 0.954
    steps = [(f"step {k:g} x threshold", k * threshold) for k in (1.2, 2.0, 3.0)]
    steps += [(f"step {100 * s:g}%", s) for s in sizes]
    found = " | ".join(f"{label}: found" for label, _ in steps)
    rows = [f"| commits | unchanged: flagged | {found} |", "|---" * (2 + len(steps)) + "|"]
    for n in (2, 6, 10, 20):
        rates = [detection(threshold, sd, n, 0.0, draws)] + [
            detection(threshold, sd, n, size, draws) for _, size in steps]
        rows.append(f"| {n} | " + " | ".join(f"{100 * r:.0f}%" for r in rates) + " |")
    return (f"{name} {measure}: threshold {100 * threshold:g}%, a run's sd "
            f"{100 * sd:.2f}%, {draws} draws each\n\n" + "\n".join(rows))


def held_back_table(proj: project.Project, data: Sequence[str] | None, folds: int) -> str:
    """Per class and measure, the unchanged pairs flagged by thresholds
    computed without them (``held_back``)."""
    if folds < 2:
        raise ValueError(f"held-back {folds}: at least 2 parts (one judged, one to judge by)")
    raw = History.load_raw(proj.history_thresholds)
    files = list(data) if data else list(raw.get("data", {}))
    rows = held_back(proj.root, raw, files, Thresholds.load(proj.thresholds), folds)
    lines = ["| class | measure | held-back pairs | flagged | rate | thresholds (per part) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r.klass} | {r.measure} | {r.pairs} | {r.flagged} | {100 * r.rate:.1f}% | "
              f"{', '.join(percent(t) for t in r.thresholds)} |" for r in rows]
    total, hit = sum(r.pairs for r in rows), sum(r.flagged for r in rows)
    return (f"{folds} parts of the series of {', '.join(files)}; the rule: max({raw['factor']}"
            f" x median, {raw.get('tail_factor', 0)} x the {tail_quantile(raw):g} "
            f"quantile), rounded up to "
            f"{percent(float(raw['step']))}\n\n" + "\n".join(lines)
            + f"\n\nin all: {hit} of {total} unchanged pairs flagged "
              f"({100 * hit / total if total else 0:.1f}%)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="study", required=True)
    simulate = sub.add_parser("simulate", help="asv's step detection on a class's noise")
    simulate.add_argument("klass", metavar="CLASS[.MEASURE]", nargs="?", default="bandwidth")
    simulate.add_argument("--sizes", metavar="PCT", type=float, nargs="+", default=[],
                          help="steps of these sizes too (percent)")
    held = sub.add_parser("held-back", help="the rule on A/A series held back from it")
    held.add_argument("folds", metavar="PARTS", type=int, nargs="?", default=2)
    held.add_argument("--from-data", metavar="FILE", nargs="+")
    args = parser.parse_args(argv)
    try:
        proj = project.find()
        if args.study == "simulate":
            print(simulation_table(History.load(proj.history_thresholds),
                                   Thresholds.load(proj.thresholds), args.klass,
                                   sizes=[s / 100 for s in args.sizes]))
        else:
            print(held_back_table(proj, args.from_data, args.folds))
    except (ConfigError, ValueError, project.ProjectError) as err:
        print(f"thresholds_study: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
