"""The main job: benchmark the current commit (or a range) and publish the site.

    kperf run                 # HEAD, all suites this machine can run
    kperf run --range A..B    # every commit of a range
    kperf run -b GemmTime     # a subset (asv -b regex)
    kperf run --baseline every   # time torch at every commit, not only when
                                          # what its timing depends on changed
    kperf run --compile every    # time the cold compiles at every commit, not
                                          # only when an op's kernels or compilers changed
    kperf run --range A..B --kernels changed   # time a TileLang or Triton
                                          # case only at commits where what its timing
                                          # depends on changed (default: every commit)

Without a GPU it runs the CPU-side suites (compile times and gfx942/sm_90a static
figures) and says so. Results go to .asv/results, per-sample records to .asv/records,
and the site to html/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kperf import machine as machine_tool
from kperf import project
from kperf.core.worker import OWNER_ENV, run_workers
from kperf.history.asvrun import (
    CPU_SUITES,
    asv_env,
    default_benches,
    run_and_publish,
    write_hashfile,
)
from kperf.machine import has_gpu

BASELINE = "torch"  # the backend every op's baseline is (kperf.ops.op.OpDef.baseline)


class Terminated(BaseException):
    """SIGTERM (``timeout``, a CI cancel, a device call's limit) raised in the main thread,
    so that the run's ``with`` blocks end as on Ctrl-C: its workers stopped, its hash file
    removed. Python's own SIGTERM ends the process without them, and a cut run's worker
    then held 31 GiB of an H200 for its idle time, failing the next step's allocations
    (vm-nvidia-h200-f42b2886, 2026-12-04, docs/journal/2026-12-04.md "Night of 2026-12-04")."""


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up
    raise Terminated


def commits(range_spec: str | None, repo: Path) -> list[str]:
    if not range_spec:
        return [subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=repo, text=True).strip()]
    out = subprocess.check_output(["git", "rev-list", "--reverse", range_spec], cwd=repo, text=True)
    return out.split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--range", help="git revision range (default: HEAD only)")
    parser.add_argument("-b", "--bench", action="append", help="asv benchmark regex")
    parser.add_argument("--machine", help="machine name (default: derived from host and GPU)")
    parser.add_argument("--no-publish", action="store_true")
    parser.add_argument(
        "--baseline", choices=("changed", "every"), default="changed",
        help="when to time each op's torch baseline: at a commit where its code, the "
             "measuring code, torch or the GPU changed since it was last timed on this "
             "machine (default), or at every commit")
    parser.add_argument(
        "--compile", choices=("changed", "every"), default="changed",
        help="when to time each op's cold compiles (the <Op>Compile suites): at a commit "
             "where its kernel sources, its compilers or the timing code changed since "
             "they were last timed on this machine (default), or at every commit")
    parser.add_argument(
        "--kernels", choices=("every", "changed"), default="every",
        help="when to time each TileLang and Triton case: at every commit (default), or "
             "only where its kernel code, compilers, measuring code, stack, plan or GPU "
             "changed since it was last timed on this machine (a long range of commits)")
    args = parser.parse_args(argv)
    repo = project.find().root

    gpu = has_gpu()
    info = machine_tool.describe(args.machine)
    machine_tool.write_machine_file(info)
    benches = selection(args.bench, gpu)
    if gpu:
        print(f"GPU: {info['gpu']} ({info['gpu_arch']}); machine {info['machine']!r}")
    else:
        print("No GPU found: running only the CPU-side benchmarks (compile times and "
              "gfx942 / sm_90a static figures). GPU timings need a CUDA or ROCm GPU.")
    env = {**asv_env(info["machine"], cpu_only=not gpu), "KPERF_BASELINE": args.baseline,
           "KPERF_COMPILE": args.compile, "KPERF_KERNELS": args.kernels}

    shas = commits(args.range, project.find().git_repo)
    for note in working_tree_notes(project.find(), shas[-1]):
        print(f"kperf: {note}", flush=True)
    started, started_at = time.monotonic(), time.time()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        # the run's measurement workers in a folder of its own, stopped when it ends
        with write_hashfile(shas, repo / ".asv") as hashfile, run_workers(
                logs=repo / ".asv" / "worker-logs") as workers:
            env["KPERF_WORKER_DIR"], env[OWNER_ENV] = str(workers), os.environ[OWNER_ENV]
            run_args = ["run", "--machine", info["machine"], "--record-samples",
                        "--show-stderr", f"HASHFILE:{hashfile}"]
            for regex in benches:
                run_args += ["-b", regex]
            code = run_and_publish(run_args, env, repo, [], repo / "html",
                                   repo / ".asv" / "records", publish=not args.no_publish)
    except Terminated:
        print("kperf: cut off by SIGTERM: the run's measurement workers stopped; nothing "
              "published; what it measured is in .asv/records (asv keeps no results of a "
              "cut run)", file=sys.stderr)
        measured = trials_summary(repo / ".asv" / "records", since=started_at)
        if measured:
            print(measured, file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(summary(repo / ".asv" / "results" / info["machine"], shas,
                  time.monotonic() - started, since=started_at, regexes=benches,
                  kernels=args.kernels))
    trials = trials_summary(repo / ".asv" / "records", since=started_at)
    if trials:
        print(trials)
    return code


def selection(regexes: list[str] | None, gpu: bool) -> list[str]:
    """asv's ``-b`` of the run: the user's, else this machine's default. Without a GPU a
    user's regex keeps only its CPU-side cases (a ``-b`` replaces the selection, and the
    timed cases would each fail for want of a GPU), and says what it left out."""
    if not regexes:
        return default_benches(gpu)
    if gpu:
        return regexes
    print(f"kperf: no GPU here: -b {' -b '.join(regexes)} runs only its CPU-side cases "
          f"(static figures and cold compiles); its timed cases (<Op>Time, <Op>Energy) are "
          f"left to a machine with a GPU", flush=True)
    return [rf"^(?=.*{CPU_SUITES})(?=.*(?:{r}))" for r in regexes]


def working_tree_notes(proj: project.Project, sha: str) -> list[str]:
    """What a run of commit ``sha`` (asv measures commits) will not see of the working
    tree, and what it takes from it: uncommitted changes of the code under test, ops that
    exist only in the working tree, and uncommitted benchmark files (asv reads those from
    the working tree, whatever the commit)."""
    root, short = proj.root, sha[:8]
    code = [str((root / folder).relative_to(root)) for folder in proj.measured.values()]
    if not proj.ops_measured:
        code.append(str(proj.ops_dir.relative_to(root)))

    def changed(*paths: str) -> list[str]:
        out = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=root,
                             capture_output=True, text=True).stdout
        return [line[3:] for line in out.splitlines() if line.strip()]

    notes = []
    edits = changed(*code)
    if edits and proj.ops_measured:
        notes.append(f"uncommitted changes of the code under test ({', '.join(edits[:5])}"
                     f"{', ...' if len(edits) > 5 else ''}): asv measures commit {short} "
                     f"without them; commit them to measure them")
    benches = changed("benchmarks")
    if benches:
        notes.append(f"benchmarks/ is read from the working tree for every commit: its "
                     f"uncommitted {', '.join(benches[:5])} are used")
    if proj.ops_measured and proj.ops_dir.is_dir():
        listed = subprocess.run(["git", "ls-tree", "-d", "--name-only", f"{sha}:"
                                 f"{proj.ops_dir.relative_to(root).as_posix()}"], cwd=root,
                                capture_output=True, text=True).stdout.split()
        new = sorted(d.name for d in proj.ops_dir.iterdir()
                     if (d / "__init__.py").is_file() and d.name not in listed)
        if new:
            notes.append(f"op(s) {', '.join(new)} exist only in the working tree, not in "
                         f"commit {short}: their cases are skipped there ('does not exist at "
                         f"this commit'); commit them to measure them")
    return notes


def trials_summary(records: Path, since: float = 0.0) -> str:
    """How many trials the run's measurements took and why they stopped (kperf/core/timing.py,
    adaptive trials), and their warm-ups (kperf/core/warmup.py), from the records written at
    or after ``since`` ('' if none)."""
    taken: list[int] = []
    stops: dict[str, int] = {}
    warmups_s: list[float] = []
    cool = retaken = 0
    for path in records.rglob("*.json") if records.is_dir() else []:
        if path.stat().st_mtime < since:  # an earlier run's: not read at all
            continue
        try:
            m = json.loads(path.read_text()).get("measurement") or {}
        except (OSError, json.JSONDecodeError):
            continue  # the site's telemetry page names unreadable records
        if not m.get("samples"):
            continue
        taken.append(len(m["samples"]))
        retaken += int(m.get("trials_retaken") or 0)
        stop = m.get("trials_stop", "fixed")
        stops[stop] = stops.get(stop, 0) + 1
        if isinstance(m.get("warmup_s"), int | float):
            warmups_s.append(m["warmup_s"])
            cool += bool(m.get("warmup_cool"))
    if not taken:
        return ""
    why = ", ".join(f"{n} {stop}" for stop, n in sorted(stops.items(), key=lambda kv: -kv[1]))
    warm = (f"; warm-ups: median {statistics.median(warmups_s):.2f} s, {cool} of "
            f"{len(warmups_s)} ended far from the power cap" if warmups_s else "")
    again = (f"; {retaken} taken again, the host behind the GPU (kperf/core/timing.py)"
             if retaken else "")
    return (f"kperf: trials: {len(taken)} measurements, median {statistics.median(taken):g} "
            f"({min(taken)}-{max(taken)}), {sum(taken)} in all{again}; stopped: {why}{warm}")


def summary(results: Path, shas: list[str], wall_s: float, since: float = 0.0,
            regexes: list[str] | None = None, kernels: str = "every") -> str:
    """What the run did: cases by outcome, the wall time, the time a case took.

    asv merges a run into the commit's results file, so only the cases of benchmarks
    that started at or after ``since`` (epoch seconds) and that ``regexes`` (asv's -b)
    select are this run's. ``kernels``: the run's --kernels; under "changed" a skipped
    TileLang or Triton time or energy case is counted as one timed elsewhere (its skip
    reason is not in the results file)."""
    from kperf import results as asv_results
    from kperf.gate.asvio import selected

    counts = {"ok": 0, "failed": 0, "skipped": 0}
    baselines_skipped = compiles_skipped = kernels_skipped = 0
    for sha in shas:
        for path in sorted(results.glob(f"{sha[:8]}-*.json")):
            try:
                cases = list(asv_results.load(path).cases())
            except asv_results.ResultsFileError as err:
                return f"kperf: the run's results are unreadable: {err}"
            for case in cases:
                name, started = case.name, case.started_at_ms
                if (not since or (started is not None and started >= since * 1000.0)) \
                        and selected(name, regexes or []):
                    counts[case.status] += 1
                    skipped = case.status == "skipped"
                    baselines_skipped += skipped and name.endswith(f", '{BASELINE}')")
                    compiles_skipped += skipped and ".track_compile(" in name
                    kernels_skipped += (skipped and kernels == "changed"
                                        and _timed_kernel(name))
    run = counts["ok"] + counts["failed"]
    per_case = f"; {wall_s / run:.1f} s a case run" if run else ""
    unchanged = [f"{n} {what}" for n, what in (
        (baselines_skipped, f"the {BASELINE} baseline (--baseline every)"),
        (compiles_skipped, "cold compiles (--compile every)"),
        (kernels_skipped, "TileLang or Triton cases (--kernels every)")) if n]
    unchanged_note = (f" ({' and '.join(unchanged)}: timed only where they changed)"
                      if unchanged else "")
    return (f"kperf: {sum(counts.values())} cases over {len(shas)} commit(s): "
            f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped"
            f"{unchanged_note}; "
            f"wall {wall_s / 60:.1f} min{per_case} (asv, its environments and the site)")


def _timed_kernel(name: str) -> bool:
    """A TileLang or Triton case of a time or energy suite (the --kernels policy's)."""
    timed = ".track_time(" in name or ".track_energy(" in name
    return timed and not name.endswith(f", '{BASELINE}')")


if __name__ == "__main__":
    sys.exit(main())
