"""Run asv with the harness's environment: stack linked in, caches and records placed.

Every tool that drives asv goes through ``asv_env`` and ``run_asv``, so benchmarks see
the same stack, caches and machine name whether they run from the main job, the gate
or a test.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kperf import project

# Suites that need no GPU: static figures of gfx942 / sm_90a code and compile times.
CPU_SUITES = r"(Registers|Scratch|SharedMem|Occupancy|CodeSize|Compile)\."
TIMED_SUITES = r"(Time|Energy)\.track_"
CODEGEN_TARGETS = ("gfx942", "gfx950", "sm_90a")
CODEGEN_BACKENDS = ("tilelang", "triton")


def codegen_selection(toolchain: str | None = None) -> tuple[list[str], dict[str, str]]:
    """(asv ``-b`` regexes of the CPU-side suites, {target/backend: why this machine cannot
    build it}): every suite where this machine builds every target and backend, none
    where it lacks one. A suite is a benchmark parameterized over the targets and backends,
    and asv records each combination a machine did not run as a NaN, a dead series in that
    machine's history (a GPU runner set up without LLVM 19 held every gfx942 series of both
    languages so: docs/journal/2026-12-06.md); the CPU codegen runner makes them all
    (docs/amd.md)."""
    from kperf.core.static import unavailable
    from kperf.toolchains import ensure_hip_tree

    ensure_hip_tree()  # shipped with kperf: unpacked where a project has none yet
    left_out = {f"{target}/{backend}": why for target in CODEGEN_TARGETS
                for backend in CODEGEN_BACKENDS
                if (why := unavailable(target, backend, toolchain))}
    return ([] if left_out else [CPU_SUITES]), left_out


def default_benches(gpu: bool) -> list[str]:
    """What a run selects when not told: the timed suites where there is a GPU, and the
    CPU-side cases this machine can build (``codegen_selection``; what it cannot is said)."""
    regexes, left_out = codegen_selection()
    if left_out:
        print("kperf: the static figures and cold compiles are left to a machine that builds "
              "every target (the CPU codegen runner, docs/amd.md); here: " + "; ".join(
                  f"{what}: {why}" for what, why in left_out.items()), flush=True)
    out = ([TIMED_SUITES] if gpu else []) + regexes
    if not out:
        raise SystemExit("kperf: nothing to run here: no GPU, and no target's code can be "
                         "built (see above)")
    return out


def stack_site_dirs() -> list[str]:
    """Where this interpreter finds torch/Triton/TileLang: its site-packages and PYTHONPATH."""
    dirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in dirs:
            dirs.append(path)
    return [str(Path(d).resolve()) for d in dirs if Path(d).is_dir()]


def link_dir(proj: project.Project) -> Path:
    """A folder holding only links to what every asv environment of the project imports
    besides its stack: this kperf (the instrument, the same for every commit) and, where
    the project's ops are not the code under test (it tracks a library), its ops package
    from the working tree. Only those names: the folder a link points into may hold other
    packages (the repository's own code under test) that must come from the commit."""
    import kperf

    folder = proj.root / ".asv" / "kperf-link"
    folder.mkdir(parents=True, exist_ok=True)
    links = {"kperf": Path(kperf.__file__).resolve().parent}
    if not proj.ops_measured:
        links[proj.ops] = proj.ops_dir.resolve()
    for entry in folder.iterdir():
        if entry.name not in links:
            entry.unlink()
    for name, target in links.items():
        link = folder / name
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return folder


def asv_env(machine: str, repo: Path | None = None, cpu_only: bool = False) -> dict[str, str]:
    proj = project.find() if repo is None else project.load(repo)
    repo = proj.root
    cache = repo / ".cache"
    env = dict(os.environ)
    site_dirs = os.pathsep.join([str(link_dir(proj)), *stack_site_dirs()])
    env.update(project.environment(proj))
    env.update({
        "KPERF_STACK_SITE": site_dirs,
        "ASV_PYTHONPATH": site_dirs,  # lets pip inside asv envs see the stack's build tools
        "KPERF_MACHINE": machine,
        "KPERF_RECORD_DIR": str(repo / ".asv" / "records"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TILELANG_CACHE_DIR": str(cache / "tilelang"),
        "TRITON_DEFAULT_FP_FUSION": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
    })
    # Imported once in asv's fork server (benchmarks/__init__.py). TileLang's import
    # initialises CUDA, which forked children then cannot use; they never do: timed cases
    # run in a measurement worker (kperf/core/worker.py), a fresh process.
    env["KPERF_PREIMPORT"] = "torch,triton,tilelang"
    return env


def run_asv(args: list[str], env: dict[str, str], repo: Path,
            check: bool = False, log: Path | None = None) -> subprocess.CompletedProcess:
    """asv with these arguments; ``log``: append its output to that file instead of
    showing it (parallel runs)."""
    cmd = [sys.executable, "-m", "asv", *args]
    # The suites compile ahead the cases asv was asked for (kperf/suites/timed.py)
    env = {**env, "KPERF_BENCH_REGEX": json.dumps(bench_regexes(args))}
    if log is None:
        print("+ asv " + " ".join(args), flush=True)
        return _run_with_eta(cmd, repo, env, check)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write("+ asv " + " ".join(args) + "\n")
        out.flush()
        return subprocess.run(cmd, cwd=repo, env=env, check=check, stdout=out,
                              stderr=subprocess.STDOUT)


def bench_regexes(args: Sequence[str]) -> list[str]:
    """The ``-b`` / ``--bench`` regexes of an asv command line."""
    out = []
    for i, arg in enumerate(args):
        if arg in ("-b", "--bench") and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith("--bench="):
            out.append(arg.split("=", 1)[1])
    return out


PROGRESS = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")
FINISHED = re.compile(r"^\[\s*\d+(?:\.\d+)?%\] ··· ([A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,})\s")
RUNNING = re.compile(r"^· Running (\d+) total benchmarks \((\d+) commits \* (\d+) env")
ETA_EVERY_S = 30.0
# The benchmarks done set the pace once they have taken this long. A day's commit skips
# most compile suites (kperf/suites/timed.py): done in 0.2 s against 44 s expected, the
# first one alone said "about 0 s left" with a minute to go (H200, 2026-12-02).
PACE_EVIDENCE_S = 30.0
# Seconds a case of each kind of benchmark took with warm caches (H200 machine,
# 2026-12-01, docs/journal/2026-12-01.md "Around midnight"): the first timed suite of an op measures
# (warm-up, trials, energy burst), the second reads that measurement; the compile suite
# compiles four times a case, and its first compile gives the static figure suites their
# figures. The run's own pace then scales these.
CASE_SECONDS = {"measure": 4.0, "reuse": 0.1, "compile": 11.0, "static": 0.05}


def expected_seconds(benchmarks: dict[str, dict[str, Any]],
                     regexes: Sequence[str]) -> dict[str, float]:
    """Benchmark name -> the seconds it should take, in asv's order (sorted names): its
    selected cases (asv's -b matching: name(param reprs)) times ``CASE_SECONDS``."""
    from kperf.gate.asvio import case_name, selected

    out: dict[str, float] = {}
    seen_timed: set[str] = set()
    for name in sorted(benchmarks):
        meta = benchmarks[name]
        if not isinstance(meta, dict) or "params" not in meta:
            continue
        combos = itertools.product(*meta["params"]) if meta["params"] else [()]
        cases = sum(selected(case_name(name, c), regexes) for c in combos)
        if not cases:
            continue
        module, method = name.split(".")[0], name.rsplit(".", 1)[-1]
        if method in ("track_time", "track_energy"):
            kind = "reuse" if module in seen_timed else "measure"
            seen_timed.add(module)
        else:
            kind = "compile" if method == "track_compile" else "static"
        out[name] = cases * CASE_SECONDS[kind]
    return out


class Eta:
    """How long an ``asv run`` has left, said every ``ETA_EVERY_S``.

    Once asv has discovered the suite, each benchmark is weighed by its selected cases
    and the seconds such a case takes (``expected_seconds``); the benchmarks done so far
    set the pace. Without ``benchmarks.json`` it falls back on asv's ``[ 37.50%]``,
    which counts a 48-case GPU suite the same as a 4-case static one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 benchmarks_json: Path | None = None, regexes: Sequence[str] = ()) -> None:
        self.clock, self.start, self.last = clock, clock(), clock()
        self.benchmarks_json, self.regexes = benchmarks_json, list(regexes)
        self.order: list[tuple[str, float]] = []  # one commit's benchmarks, asv's order
        self.steps = 0  # benchmarks in the whole run (commits x environments x suite)
        self.done = 0
        self.done_expected = 0.0  # what the benchmarks done so far were expected to take
        self.done_spent = 0.0  # ... and what they took
        self.running_since = self.start
        self.percent = 0.0

    def update(self, line: str) -> str | None:
        """Take one line of asv's output; a progress note when one is due."""
        now = self.clock()
        running = RUNNING.match(line)
        if running:
            self._plan(int(running.group(2)) * int(running.group(3)))
            self.running_since = now
        match = PROGRESS.match(line)
        if match:
            self.percent = float(match.group(1)) / 100.0
        finished = FINISHED.match(line)
        if finished and self.order and self.done < self.steps:
            self.done_expected += self.order[self.done % len(self.order)][1]
            self.done_spent = now - self.running_since
            self.done += 1
        return self.note() if match else None

    def _plan(self, copies: int) -> None:
        if self.benchmarks_json is None or not self.benchmarks_json.is_file():
            return
        try:
            meta = json.loads(self.benchmarks_json.read_text())
        except (OSError, ValueError):
            return
        self.order = list(expected_seconds(meta, self.regexes).items())
        self.steps = len(self.order) * max(1, copies)

    def note(self, force: bool = False) -> str | None:
        now = self.clock()
        if not force and now - self.last < ETA_EVERY_S:
            return None
        if self.order:
            left = self._left_planned(now)
            done = f"{self.done} of {self.steps} benchmarks done"
        elif self.percent > 0.0:
            elapsed = now - self.start
            left = elapsed * (1.0 - self.percent) / self.percent
            done = f"{self.percent:.0%} of the run done"
        else:
            return None
        self.last = now
        return (f"kperf: {done} after {_minutes(now - self.start)}; about "
                f"{_minutes(left)} left")

    def _left_planned(self, now: float) -> float:
        if self.done >= self.steps:
            return 0.0
        total = sum(seconds for _, seconds in self.order) * self.steps / len(self.order)
        pace = (self.done_spent / self.done_expected
                if self.done_expected > 0 and self.done_spent >= PACE_EVIDENCE_S else 1.0)
        current = self.order[self.done % len(self.order)][1]  # the benchmark running now
        in_current = now - self.running_since - self.done_spent
        after = total - self.done_expected - current
        return max(0.0, after * pace) + max(0.0, current * pace - in_current)


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def _run_with_eta(cmd: list[str], repo: Path, env: dict[str, str],
                  check: bool) -> subprocess.CompletedProcess:
    """asv with its output passed through, and an ETA line every ``ETA_EVERY_S`` (also
    while a long benchmark prints nothing)."""
    eta = Eta(benchmarks_json=repo / ".asv" / "results" / "benchmarks.json",
              regexes=json.loads(env.get("KPERF_BENCH_REGEX") or "[]"))
    lock = threading.Lock()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(ETA_EVERY_S / 3):
            with lock:
                note = eta.note()
            if note:
                print(note, flush=True)

    ticker = threading.Thread(target=tick, daemon=True, name="kperf-eta")
    with subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        ticker.start()
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                with lock:
                    note = eta.update(line)
                if note:
                    print(note, flush=True)
        except BaseException:
            proc.kill()  # Ctrl-C: asv's partial results are its own to keep or not
            raise
        finally:
            stop.set()
        code = proc.wait()
    if check and code != 0:
        raise subprocess.CalledProcessError(code, cmd)
    return subprocess.CompletedProcess(cmd, code)


@contextlib.contextmanager
def write_hashfile(shas: Sequence[str], folder: Path) -> Iterator[str]:
    """A file of commit hashes, for asv's ``HASHFILE:`` revision argument, in ``folder``
    (the project's ``.asv``: a run killed outright leaves it there, not in the temporary
    folder), removed when the ``with`` block ends, also on an error or Ctrl-C."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="kperf-hashes-", suffix=".txt", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(shas) + "\n")
        yield path
    finally:
        Path(path).unlink(missing_ok=True)


def publish_site(env: dict[str, str], repo: Path, config_args: Sequence[str],
                 html_dir: Path, records_dir: Path) -> int:
    """The site (kperf/site/publish.py): ``asv publish`` into a new folder beside ``html_dir``,
    made to work offline, with kperf's pages (head to head, clocks and power per point,
    gate reports) from the records under ``records_dir`` and those kept with the results;
    swapped in only when built, so a failure keeps the old site."""
    from kperf.gate.asvio import load_project_conf
    from kperf.gate.errors import GateError
    from kperf.site import publish

    config = None
    args = list(config_args)
    if "--config" in args and args.index("--config") + 1 < len(args):
        config = Path(args[args.index("--config") + 1])
    conf_path = (config or repo / "asv.conf.json").resolve()
    try:
        results_dir = conf_path.parent / load_project_conf(conf_path).get("results_dir",
                                                                           "results")
    except GateError:  # publish() reports an unreadable config itself
        results_dir = repo / ".asv" / "results"
    records = [records_dir] + [p for p in [results_dir / "records"] if p.exists()]
    return publish.publish(repo, config, html_dir, records, env=env)


def run_and_publish(run_args: Sequence[str], env: dict[str, str], repo: Path,
                    config_args: Sequence[str], html_dir: Path, records_dir: Path,
                    publish: bool = True) -> int:
    """``asv run``; unless it broke (exit 0, or 2: some benchmarks failed and are recorded),
    publish the site. Returns asv's exit code, or publish's if that failed."""
    rc = run_asv([*config_args, *run_args], env, repo).returncode
    if rc not in (0, 2):
        print(f"asv run failed (exit {rc}); nothing published", file=sys.stderr)
        return rc
    if rc == 2:
        print("some benchmarks failed; their errors are above and in the results",
              file=sys.stderr)
    if publish:
        return publish_site(env, repo, config_args, html_dir, records_dir) or rc
    return rc
