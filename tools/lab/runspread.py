"""How far two asv runs of one commit put the same cases: the A/A spread of the history.

    python -m tools.lab.runspread cold/.asv/results/M/abcd1234-ENV.json \\
                              warm/.asv/results/M/abcd1234-ENV.json

asv keeps one result per case and commit, so a second run of a commit overwrites the first:
keep each run's results file (tools/gpu_validate.sh packs one per asv step) and give them
here. For every timed case both runs measured, the ratio of the values asv reports (what
``asv publish`` draws), second over first; then, per suite, how many cases there are, the
median and the largest |ratio - 1|, and the cases beyond ``--flag`` (default 1%). This is
the figure that says whether a faster suite still gives the same history (docs/perf.md).

An asv step cut off by its limit keeps no results file, only the harness's records
(.asv/records/M/abcd1234-ENV, one per measurement): either argument may be such a folder.
A record gives what asv would have reported: the median of its samples, and its energy per
call; where a case was measured twice, the later record. A commit run twice keeps both
runs' records in one folder: given alone, that folder's cases measured twice are
compared, first record against last.

Then, per class (the gate's, thresholds.json) and measure (time, energy per call): the
median |ratio - 1| is the class's run-to-run spread as history-thresholds.json holds it,
and the cases beyond the history's threshold (asv.conf.json) are the steps a two-commit
history of unchanged code would flag (docs/site.md, "Regression thresholds of the
history"). Where both runs are records folders, also per timing method: graph-replayed
kernels under 20 us moved most between two runs of a commit on 2026-12-04 (H200,
docs/journal/2026-12-04.md, "Afternoon of 2026-12-04"), and a case timed differently in the
two runs stepped with its method.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kperf import project
from kperf.gate.asvio import ResultsFileError, read_results_file

REPO = Path(__file__).resolve().parents[2]

TIMED = ".track_time("
ENERGY = ".track_energy("
LATEST, FIRST_RUN, LAST_RUN = "latest", "first", "last"  # which record of a case: ``_pick``


def values(path: Path, kind: str = TIMED, which: str = LATEST) -> dict[str, float]:
    """Case name -> the value asv reports, for the cases of ``kind`` (timed, or energy
    per call: ``ENERGY``) that ran; ``path`` an asv results file or a records folder (of
    which ``which`` record of a case: ``_pick``)."""
    if path.is_dir():
        return record_values(path, kind, which)
    _, cases = read_results_file(path)
    return {name: float(block.value) for name, block in cases.items()
            if kind in name and block.status == "ok" and block.value}


def time_records(folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(the case's Time series, named as asv names it; the record) for each time record
    under ``folder``, a records folder of one commit and environment."""
    for path in sorted(folder.rglob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ResultsFileError(path, f"not a record ({err})") from err
        if record.get("kind") != "time":
            continue
        try:
            params = record["params"]
            name = f"{record['benchmark']}({params['case']!r}, {params['dtype']!r}, " \
                   f"{params['backend']!r})"
        except (KeyError, TypeError) as err:
            raise ResultsFileError(path, f"a time record without {err}") from err
        yield name, record


def record_values(folder: Path, kind: str = TIMED, which: str = LATEST) -> dict[str, float]:
    """``values`` from the time records under ``folder``, named as asv names the cases."""
    if kind == ENERGY:
        got = {name.replace("Time.track_time(", "Energy.track_energy("): value for name, value
               in _pick(folder, lambda r: r.get("energy_per_call_j"), which).items()}
    else:
        got = _pick(folder, _median_sample, which)
    if not got and not any(folder.rglob("*.json")):  # only where nothing was read
        raise ResultsFileError(folder, "no records")
    return {name: float(value) for name, value in got.items()}


def record_methods(folder: Path, which: str = LATEST) -> dict[str, str]:
    """Case name -> how its ``which`` record was timed (``graph`` or ``events``)."""
    return {name: str(mode) for name, mode in
            _pick(folder, lambda r: (r.get("measurement") or {}).get("mode"), which).items()}


def _median_sample(record: dict[str, Any]) -> float | None:
    samples = (record.get("measurement") or {}).get("samples")
    return statistics.median(samples) if samples else None


def _pick(folder: Path, pick: Callable[[dict[str, Any]], Any], which: str = LATEST
          ) -> dict[str, Any]:
    """Case name -> ``pick(record)`` of one of its time records for which it is set: the
    latest (``LATEST``; a case measured twice: the later one), or of the cases measured
    at least twice, the first (``FIRST_RUN``) or the last (``LAST_RUN``): a commit run again
    keeps both runs' records in its folder."""
    by_case: dict[str, list[tuple[float, Any]]] = {}
    for name, record in time_records(folder):
        value = pick(record)
        if value:
            by_case.setdefault(name, []).append((float(record.get("recorded_at") or 0.0), value))
    picked: dict[str, Any] = {}
    for name, found in sorted(by_case.items()):
        found.sort(key=lambda r: r[0])  # stable: of two records at one instant, the later read
        if which == LATEST:
            picked[name] = found[-1][1]
        elif len(found) > 1:
            picked[name] = found[0 if which == FIRST_RUN else -1][1]
    return picked


def method_table(by_case: dict[str, float], first: dict[str, str], second: dict[str, str],
                 flag: float) -> str:
    """Per timing method (the same in both runs, or changed): cases, the spread, the
    largest, how many beyond ``flag``, and how many read faster in the second run (a lean
    one way is a difference between the runs, not noise)."""
    groups: dict[str, list[float]] = {}
    for name, ratio in by_case.items():
        a, b = first.get(name), second.get(name)
        if a and b:
            groups.setdefault(a if a == b else f"{a} -> {b}", []).append(ratio)
    lines = ["| timed by | cases | median \\|ratio - 1\\| | largest | beyond "
             f"{flag:.1%} | faster in the second |", "|---|---|---|---|---|---|"]
    for method, rs in sorted(groups.items()):
        devs = [abs(r - 1.0) for r in rs]
        lines.append(f"| {method} | {len(rs)} | {statistics.median(devs):.2%} | "
                     f"{max(devs):.2%} | {sum(d > flag for d in devs)} | "
                     f"{sum(r < 1.0 for r in rs)} |")
    return "\n".join(lines)


def ratios(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    return {name: second[name] / first[name] for name in sorted(first.keys() & second.keys())}


def suite(name: str) -> str:
    """bench_gemm.GemmTime.track_time('square-8192', ...) -> bench_gemm"""
    return name.split(".", 1)[0]


def table(by_case: dict[str, float], flag: float) -> str:
    groups: dict[str, list[float]] = {}
    for name, ratio in by_case.items():
        groups.setdefault(suite(name), []).append(abs(ratio - 1.0))
    groups["all"] = [abs(r - 1.0) for r in by_case.values()]
    lines = ["| suite | cases | median \\|ratio - 1\\| | largest | beyond "
             f"{flag:.1%} |", "|---|---|---|---|---|"]
    for name, devs in groups.items():
        beyond = sum(d > flag for d in devs)
        lines.append(f"| {name} | {len(devs)} | {statistics.median(devs):.2%} | "
                     f"{max(devs):.2%} | {beyond} |")
    lines += ["", f"Cases beyond {flag:.1%}:"]
    lines += [f"- {name}: x{r:.4f}" for name, r in sorted(by_case.items(), key=lambda kv:
                                                          -abs(kv[1] - 1.0))
              if abs(r - 1.0) > flag] or ["- none"]
    return "\n".join(lines)


def class_table(by_case: dict[str, float], repo: Path = REPO) -> str:
    """Per class and measure: cases, the spread (median |ratio - 1|), the largest, and how
    many the history's thresholds would flag."""
    from kperf.gate.config import Thresholds
    from kperf.site.series import series_class, threshold_of
    from kperf.site.spreads import History

    proj = project.of(repo)
    gate, history = Thresholds.load(proj.thresholds), History.load(proj.history_thresholds)
    groups: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for name, ratio in by_case.items():
        klass, energy = series_class(name, gate)
        flagged = ratio - 1.0 > threshold_of(name, gate, history)  # asv flags a rise only
        groups.setdefault((klass.name, "energy" if energy else "time"), []).append(
            (abs(ratio - 1.0), flagged))
    lines = ["| class | measure | cases | spread: median \\|ratio - 1\\| | largest | "
             "flagged by the history |", "|---|---|---|---|---|---|"]
    for (klass, measure), devs in sorted(groups.items()):
        spread = statistics.median(d for d, _ in devs)
        lines.append(f"| {klass} | {measure} | {len(devs)} | {spread:.2%} | "
                     f"{max(d for d, _ in devs):.2%} | {sum(f for _, f in devs)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab.runspread", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", type=Path,
                        help="the first run's asv results file, or its records folder")
    parser.add_argument("second", type=Path, nargs="?",
                        help="the second run's, same code; left out, the first is a records "
                             "folder of a commit run twice, and its cases measured twice are "
                             "compared, first run against last")
    parser.add_argument("--flag", type=float, default=0.01,
                        help="list the cases whose ratio is further than this from 1")
    args = parser.parse_args(argv)
    if args.second is None and not args.first.is_dir():
        print(f"runspread: {args.first}: with one argument, give a records folder "
              "(.asv/records/<machine>/<commit>-<env>) of a commit run twice", file=sys.stderr)
        return 2
    runs = ([(args.first, LATEST), (args.second, LATEST)] if args.second
            else [(args.first, FIRST_RUN), (args.first, LAST_RUN)])
    try:
        by_case = ratios(*(values(path, TIMED, which) for path, which in runs))
        energy = ratios(*(values(path, ENERGY, which) for path, which in runs))
    except ResultsFileError as err:
        print(f"runspread: {err}", file=sys.stderr)
        return 2
    if not by_case:
        print(f"runspread: no timed case ran in both {args.first} and "
              f"{args.second or 'again in it'}", file=sys.stderr)
        return 2
    print(table(by_case, args.flag))
    print("\nPer class, time and energy per call (history-thresholds.json's spread):\n")
    print(class_table(by_case | energy))
    if all(path.is_dir() for path, _ in runs):
        print("\nBy timing method (graph replay under 20 us, else events), time:\n")
        print(method_table(by_case, *(record_methods(path, which) for path, which in runs),
                           args.flag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
