"""Run asv with the harness's environment: stack linked in, caches and records placed.

Every tool that drives asv goes through ``asv_env`` and ``run_asv``, so benchmarks see
the same stack, caches and machine name whether they run from the main job, the gate
or a test.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Suites that need no GPU: static figures of gfx942 / sm_90a code and compile times.
CPU_SUITES = r"(Registers|Scratch|SharedMem|Occupancy|Compile)\."


def stack_site_dirs() -> list[str]:
    """Where this interpreter finds torch/Triton/TileLang: its site-packages and PYTHONPATH."""
    dirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in dirs:
            dirs.append(path)
    return [str(Path(d).resolve()) for d in dirs if Path(d).is_dir()]


def asv_env(machine: str, repo: Path = REPO, cpu_only: bool = False) -> dict[str, str]:
    cache = repo / ".cache"
    env = dict(os.environ)
    site_dirs = os.pathsep.join(stack_site_dirs())
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
    # run in a measurement worker (harness/worker.py), a fresh process.
    env["KPERF_PREIMPORT"] = "torch,triton,tilelang"
    return env


def run_asv(args: list[str], env: dict[str, str], repo: Path = REPO,
            check: bool = False, log: Path | None = None) -> subprocess.CompletedProcess:
    """asv with these arguments; ``log``: append its output to that file instead of
    showing it (parallel runs, tools/shard.py)."""
    cmd = [sys.executable, "-m", "asv", *args]
    if log is None:
        print("+ asv " + " ".join(args), flush=True)
        return _run_with_eta(cmd, repo, env, check)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write("+ asv " + " ".join(args) + "\n")
        out.flush()
        return subprocess.run(cmd, cwd=repo, env=env, check=check, stdout=out,
                              stderr=subprocess.STDOUT)


PROGRESS = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")
ETA_EVERY_S = 30.0


class Eta:
    """Reads asv's ``[ 37.50%]`` progress and says, now and then, how long is left."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.start, self.last = clock, clock(), clock()

    def update(self, line: str) -> str | None:
        match = PROGRESS.match(line)
        now = self.clock()
        if not match or now - self.last < ETA_EVERY_S:
            return None
        done = float(match.group(1)) / 100.0
        if done <= 0.0:
            return None
        self.last = now
        elapsed = now - self.start
        return (f"kperf: {done:.0%} of the run done after {_minutes(elapsed)}; about "
                f"{_minutes(elapsed * (1.0 - done) / done)} left")


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def _run_with_eta(cmd: list[str], repo: Path, env: dict[str, str],
                  check: bool) -> subprocess.CompletedProcess:
    """asv with its output passed through, and an ETA line every ``ETA_EVERY_S``."""
    eta = Eta()
    with subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                note = eta.update(line)
                if note:
                    print(note, flush=True)
        except BaseException:
            proc.kill()  # Ctrl-C: asv's partial results are its own to keep or not
            raise
        code = proc.wait()
    if check and code != 0:
        raise subprocess.CalledProcessError(code, cmd)
    return subprocess.CompletedProcess(cmd, code)


@contextlib.contextmanager
def write_hashfile(shas: Sequence[str]) -> Iterator[str]:
    """A file of commit hashes, for asv's ``HASHFILE:`` revision argument, removed when
    the ``with`` block ends, also on an error or Ctrl-C (only SIGKILL can leave it)."""
    fd, path = tempfile.mkstemp(prefix="kperf-hashes-", suffix=".txt")
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(shas) + "\n")
        yield path
    finally:
        Path(path).unlink(missing_ok=True)


def publish_site(env: dict[str, str], repo: Path, config_args: Sequence[str],
                 html_dir: Path, records_dir: Path) -> int:
    """The site (tools/publish.py): ``asv publish`` into a new folder beside ``html_dir``,
    made to work offline, with kperf's pages (head to head, clocks and power per point,
    gate reports) from the records under ``records_dir`` and those kept with the results;
    swapped in only when built, so a failure keeps the old site."""
    from tools import publish
    from tools.gate.asvio import load_project_conf
    from tools.gate.errors import GateError

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


def has_gpu() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0
