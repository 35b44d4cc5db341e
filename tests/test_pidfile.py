"""A leftover worker pid file never makes ``retire`` kill a process that is not the worker
it was written for (kperf/core/pidfile.py, kperf/core/worker.py; issue 27: pid reuse)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kperf.core.pidfile import read_pid, start_time, write_pid
from kperf.core.worker import retire


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen]:
    """A process of somebody else's, leader of its own process group, whose pid a stale
    pid file names (the kernel gave the dead worker's number to it)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def workers() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kperf-pid-"))
    yield folder
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def leftover(folder: Path, text: str) -> Path:
    """What a worker that died without cleaning up leaves: its socket and key (dead
    files) and its pid file."""
    for suffix in (".sock", ".key"):
        (folder / f"w{suffix}").write_text("")
    (folder / "w.pid").write_text(text)
    return folder / "w.pid"


@pytest.mark.parametrize("stale", ["older version", "same pid, another start"])
def test_retire_leaves_a_process_that_reuses_a_dead_workers_pid_alone(
        bystander: subprocess.Popen, workers: Path, stale: str) -> None:
    pid = bystander.pid
    text = f"{pid}\n" if stale == "older version" else f"{pid} {int(start_time(pid)) - 1}\n"
    leftover(workers, text)
    assert retire(workers) == 1
    time.sleep(0.2)
    assert bystander.poll() is None, "retire killed a process that was not its worker"
    assert sorted(p.name for p in workers.iterdir()) == [], "the dead worker's files stay"


def test_retire_still_stops_its_own_worker(bystander: subprocess.Popen, workers: Path) -> None:
    """The same process, named by a pid file written for it, is the worker: stopped (it
    answers no shutdown request, so after its grace time its group is killed)."""
    write_pid(leftover(workers, ""), bystander.pid)
    assert read_pid(workers / "w.pid") == bystander.pid
    retire(workers)
    assert bystander.wait(timeout=30) is not None


def test_a_pid_file_names_no_process_once_it_is_gone(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    write_pid(tmp_path / "p.pid", proc.pid)
    assert read_pid(tmp_path / "p.pid") == proc.pid
    proc.kill()
    proc.wait()
    with pytest.raises(ValueError, match="gone or is another process"):
        read_pid(tmp_path / "p.pid")
    (tmp_path / "q.pid").write_text("not a pid")
    with pytest.raises(ValueError, match="not a pid file"):
        read_pid(tmp_path / "q.pid")
