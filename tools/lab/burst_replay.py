"""What shorter or fewer energy bursts would have read, replayed from two runs' records.

    python -m tools.lab.burst_replay first/.asv/records/M/abcd1234-ENV \\
                                     second/.asv/records/M/ef567890-ENV

Each timed case's record keeps its bursts (kperf/core/energy.py): every burst's energy per
call and, since 2026-12-04, the energy counter's updates inside it, as [seconds since the
burst began, joules since its first update]. A burst of ``length`` seconds would have seen
the updates up to ``length``: its power is the energy between the first and last of them
over their span, times the burst's device time per call. The figure of ``count`` bursts is
the median of the first ``count``. For each length and count, per class, the A/A spread of
the two runs: the median |ratio - 1| of the cases both measured, second over first, and
how many cases the replay could not give a figure (fewer than two updates in the length).
The full length replays the recorded figures, so older records (without updates) still
answer for fewer bursts.

``--agree 0.01,0.02``: bursts taken as needed, replayed: two, whose mean is the figure
where they agree within the tolerance, else a third and the median of three; per class the
spread and the bursts a case would have taken.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf import project
from kperf.gate.asvio import ResultsFileError
from tools.lab.runspread import time_records

REPO = Path(__file__).resolve().parents[2]
FULL = 0.0  # the burst's whole length: its recorded figure


def load(folder: Path) -> dict[str, dict[str, Any]]:
    """Energy series name -> the ``energy_burst`` of its time record, for each timed case
    under ``folder`` (asv's records of one commit and environment)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        for name, record in time_records(folder):
            burst = (record.get("measurement") or {}).get("energy_burst")
            if burst and burst.get("per_burst"):
                out[name.replace("Time.track_time(", "Energy.track_energy(")] = burst
    except ResultsFileError as err:
        raise SystemExit(f"burst_replay: {err}") from err
    return out


def burst_energy(burst: dict[str, Any], recorded: float | None, length: float) -> float | None:
    """One burst's energy per call as a burst of ``length`` s would have read it."""
    if length == FULL:
        return recorded
    seen = [u for u in burst.get("updates") or [] if u[0] <= length]
    if len(seen) < 2 or seen[-1][0] <= seen[0][0] or not burst.get("calls"):
        return None
    watts = (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])
    return watts * burst["device_s"] / burst["calls"]


def figure(record: dict[str, Any], length: float, count: int) -> float | None:
    """The case's energy per call from its first ``count`` bursts of ``length`` s."""
    bursts = record["per_burst"][:count]
    recorded = record.get("energy_per_call_j") or [None] * len(bursts)
    values = [burst_energy(b, e, length) for b, e in zip(bursts, recorded, strict=False)]
    if len(values) < count or any(v is None for v in values):
        return None
    return statistics.median(values)


def adaptive_figure(record: dict[str, Any], agree: float) -> tuple[float | None, int]:
    """(energy per call, bursts taken) had a third burst been run only where the first two
    differ by more than ``agree`` (relative)."""
    values = (record.get("energy_per_call_j") or [])[:3]
    if len(values) < 3 or not all(values):
        return None, 0
    if abs(values[0] / values[1] - 1.0) <= agree:
        return (values[0] + values[1]) / 2.0, 2
    return statistics.median(values), 3


def classes(names: set[str], repo: Path = REPO) -> dict[str, str]:
    """Energy series name -> its class (the gate's rule for its Time twin)."""
    from kperf.gate.config import Thresholds
    from kperf.site.series import series_class

    gate = Thresholds.load(project.of(repo).thresholds)
    return {name: series_class(name, gate)[0].name for name in sorted(names)}


def adaptive_spreads(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]],
                     agree: float, repo: Path = REPO) -> dict[str, tuple[float, int, float]]:
    """Class -> (median |ratio - 1|, cases compared, mean bursts a case) for ``agree``."""
    groups: dict[str, tuple[list[float], list[int]]] = {}
    for name, klass in classes(first.keys() & second.keys(), repo).items():
        (a, na), (b, nb) = adaptive_figure(first[name], agree), adaptive_figure(second[name],
                                                                                agree)
        if a and b:
            devs, taken = groups.setdefault(klass, ([], []))
            devs.append(abs(b / a - 1.0))
            taken += [na, nb]
    return {klass: (statistics.median(devs), len(devs), statistics.fmean(taken))
            for klass, (devs, taken) in sorted(groups.items())}


def adaptive_table(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]],
                   tolerances: Sequence[float]) -> str:
    lines = ["| two agree within | class | spread: median \\|ratio - 1\\| | cases | "
             "bursts a case |", "|---|---|---|---|---|"]
    for agree in tolerances:
        for klass, (spread, n, taken) in adaptive_spreads(first, second, agree).items():
            lines.append(f"| {agree:.1%} | {klass} | {spread:.2%} | {n} | {taken:.2f} |")
    return "\n".join(lines)


def spreads(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]],
            length: float, count: int, repo: Path = REPO) -> dict[str, tuple[float, int, int]]:
    """Class -> (median |ratio - 1|, cases compared, cases without a replayed figure)."""
    groups: dict[str, list[float | None]] = {}
    for name, klass in classes(first.keys() & second.keys(), repo).items():
        a, b = figure(first[name], length, count), figure(second[name], length, count)
        deviation = abs(b / a - 1.0) if a and b else None
        groups.setdefault(klass, []).append(deviation)
    return {klass: (statistics.median(d for d in devs if d is not None)
                    if any(d is not None for d in devs) else float("nan"),
                    sum(d is not None for d in devs), sum(d is None for d in devs))
            for klass, devs in sorted(groups.items())}


def table(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]],
          lengths: Sequence[float], counts: Sequence[int]) -> str:
    lines = ["| bursts | length | class | spread: median \\|ratio - 1\\| | cases | "
             "without a figure |", "|---|---|---|---|---|---|"]
    for count in counts:
        for length in lengths:
            shown = "as run" if length == FULL else f"{length:.2f} s"
            for klass, (spread, n, missing) in spreads(first, second, length, count).items():
                lines.append(f"| {count} | {shown} | {klass} | {spread:.2%} | {n} | {missing} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab.burst_replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=Path, help="the first run's records (one commit)")
    parser.add_argument("second", type=Path, help="the second run's records")
    parser.add_argument("--lengths", default="0.1,0.2,0.3,0",
                        help="burst lengths in s to replay, 0 for the length as run")
    parser.add_argument("--bursts", default="1,2,3", help="how many bursts to keep")
    parser.add_argument("--agree", default="",
                        help="tolerances (e.g. 0.01,0.02): a third burst only where two differ")
    args = parser.parse_args(argv)
    try:
        lengths = [float(x) for x in args.lengths.split(",")]
        counts = [int(x) for x in args.bursts.split(",")]
        tolerances = [float(x) for x in args.agree.split(",") if x]
    except ValueError:
        parser.error("--lengths takes seconds, --bursts counts and --agree fractions, "
                     "comma-separated")
    if any(x < 0 for x in lengths) or any(c < 1 for c in counts):
        parser.error("--lengths must be >= 0 and --bursts >= 1")
    runs = [load(folder) for folder in (args.first, args.second)]
    if not runs[0].keys() & runs[1].keys():
        print(f"burst_replay: no timed case with energy bursts in both {args.first} and "
              f"{args.second}", file=sys.stderr)
        return 2
    print(table(*runs, lengths, counts))
    if tolerances:
        print("\nA third burst only where the first two differ:\n")
        print(adaptive_table(*runs, tolerances))
    return 0


if __name__ == "__main__":
    sys.exit(main())
