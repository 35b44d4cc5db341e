"""Nothing of a run is left running or in the temporary folder after it ends, finished or
killed (issue 51): the CPU codegen gate on a toy project (its workers answer from figures,
tests/test_upgrade.py's), with its own TMPDIR and no worker folder given, run twice, then
killed with SIGKILL while its workers answer. Its workers live in a folder of the run's
(kperf/core/worker.py ``run_workers``), are stopped when it ends and, when it is killed,
see their owner gone and remove their files (kperf/core/workerproc.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_upgrade import HANDLER, _commit, _project

from .conftest import skip_without_every_target

REPO = Path(__file__).resolve().parent.parent
SLOW_HANDLER = HANDLER.replace('def handle(request):\n',
                               'def handle(request):\n    import os, time\n'
                               '    time.sleep(float(os.environ.get("TOY_SLEEP_S", "0")))\n')


def _ours(tmpdir: Path) -> list[str]:
    """Processes whose command line names the run's temporary folder (a worker's socket)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(tmpdir) in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def _left(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("kperf-"))


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[dict]:
    skip_without_every_target()
    repo = _project(tmp_path)
    (tmp_path / "toy_handler.py").write_text(SLOW_HANDLER)
    (repo / "kernels" / "toy" / "triton_toy.py").write_text(
        (repo / "kernels" / "toy" / "triton_toy.py").read_text().replace("'v1'", "'v2'"))
    head = _commit(repo, "the Triton kernel's code changes")
    # short: a worker's socket path must fit a Unix socket's 107 bytes
    tmpdir = Path(tempfile.mkdtemp(prefix="kl-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("KPERF_WORKER_DIR", "XDG_RUNTIME_DIR", "KPERF_ROCM_TOOLCHAIN")}
    env.update(TMPDIR=str(tmpdir), KPERF_WORKER_HANDLER=f"{tmp_path / 'toy_handler.py'}:handle")
    yield {"root": tmp_path, "repo": repo, "head": head, "tmpdir": tmpdir, "env": env}
    shutil.rmtree(tmpdir, ignore_errors=True)


def _gate(toy: dict, name: str) -> list[str]:
    return [sys.executable, "-m", "kperf", "codegen", "pr", "--repo", str(toy["repo"]),
            "--base", "HEAD~1", "--head", toy["head"], "--out", str(toy["root"] / f"out-{name}"),
            "--pr-dir", str(toy["root"] / f"pr-{name}"), "--rocm-toolchain", "clang19",
            "-b", r"Toy(Registers|Occupancy)"]


@pytest.mark.slow
def test_nothing_is_left_after_two_runs_and_a_killed_one(toy: dict) -> None:
    tmpdir = toy["tmpdir"]
    for run in ("first", "second"):
        done = subprocess.run(_gate(toy, run), cwd=REPO, env=toy["env"], capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _ours(tmpdir) == [] and _left(tmpdir) == [], (run, _ours(tmpdir), _left(tmpdir))
        logs = list((toy["root"] / f"out-{run}" / "worker-logs").glob("*.log"))
        assert logs, "the workers' logs are kept under the run's output folder"

    env = dict(toy["env"], TOY_SLEEP_S="3")
    gate = subprocess.Popen(_gate(toy, "killed"), cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(tmpdir.glob("kperf-gate-*/*.sock")):
        assert gate.poll() is None and time.monotonic() < deadline, "no worker started"
        time.sleep(0.2)
    time.sleep(1.0)  # a request under way
    gate.send_signal(signal.SIGKILL)
    gate.wait(timeout=30)
    deadline = time.monotonic() + 30
    while (_ours(tmpdir) or _left(tmpdir)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ours(tmpdir) == [], _ours(tmpdir)
    assert _left(tmpdir) == [], _left(tmpdir)
