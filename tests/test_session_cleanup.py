"""A test session leaves nothing in the temporary folder (issue 51): its cache folder goes
when it ends, when it is sent SIGTERM (a cancelled CI job), and, after a SIGKILL (which
cannot be caught), at the start of the next session (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import CACHE_ENV, CACHE_PREFIX, OWNER, REPO


def _session(tmp: Path, sleep_s: float) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in (CACHE_ENV, "KPERF_WORKER_DIR", "PYTEST_XDIST_WORKER")}
    env |= {"TMPDIR": str(tmp), "SLEEPER_S": str(sleep_s)}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "no:randomly", "tests/_session_sleeper.py"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _caches(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{CACHE_PREFIX}*"))


def _started(tmp: Path, proc: subprocess.Popen, limit_s: float = 120) -> Path:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        found = [p for p in _caches(tmp) if (p / OWNER).exists()]
        if found:
            time.sleep(2)  # into its test
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"the session never started: {proc.communicate()[0][-2000:]}")


def test_a_session_ended_or_terminated_removes_its_folder(tmp_path: Path) -> None:
    done = _session(tmp_path, 0)
    assert done.wait(180) == 0, done.communicate()[0][-2000:]
    assert _caches(tmp_path) == []
    term = _session(tmp_path, 120)
    _started(tmp_path, term)
    term.send_signal(signal.SIGTERM)
    out = term.communicate(timeout=60)[0]
    assert term.returncode != 0 and "KeyboardInterrupt" in out, out[-2000:]
    assert _caches(tmp_path) == []


def test_the_next_session_removes_the_folder_of_one_killed_outright(tmp_path: Path) -> None:
    killed = _session(tmp_path, 120)
    folder = _started(tmp_path, killed)
    killed.kill()
    killed.wait(30)
    assert _caches(tmp_path) == [folder]  # SIGKILL: nothing could remove it
    alive = tmp_path / f"{CACHE_PREFIX}running"  # a live session's: left alone
    alive.mkdir()
    (alive / OWNER).write_text(f"{os.getpid()}:{_start(os.getpid())}")
    nxt = _session(tmp_path, 0)
    assert nxt.wait(180) == 0, nxt.communicate()[0][-2000:]
    assert _caches(tmp_path) == [alive]


def _start(pid: int) -> str:
    from kperf.core.pidfile import start_time

    return str(start_time(pid))
