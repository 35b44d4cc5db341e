"""A test run beside other runs on one machine (issue 45): it reaches no network after
setup, and leaves nothing of its own in the temporary folder (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import _wheels
from tests.conftest import CACHE_ENV, DEAD_PROXY, REPO


def test_a_test_run_reaches_no_package_index() -> None:
    """Every proxy points at a closed port and pip has no index: a download fails at once
    instead of depending on the network, and what the run installs was downloaded
    before it (tools/test.sh runs ``python -m tests._wheels``)."""
    assert os.environ["https_proxy"] == os.environ["HTTPS_PROXY"] == DEAD_PROXY
    began = time.monotonic()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen("https://pypi.org/simple/asv-runner/", timeout=30)
    assert time.monotonic() - began < 10
    missing = [pin for pin in _wheels.requirements() if not _wheels.have(pin)]
    assert missing == [], "run .venv/bin/python -m tests._wheels (tools/test.sh does)"
    pins = _wheels.requirements()
    assert any(p.startswith("asv_runner==") for p in pins), pins


def test_a_pip_of_the_run_installs_from_the_downloaded_wheels_only(tmp_path: Path) -> None:
    asv_runner = next(p for p in _wheels.requirements() if p.startswith("asv_runner=="))
    got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                          str(tmp_path / "a"), asv_runner], capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 0, got.stderr
    absent = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                             str(tmp_path / "b"), "kperf-no-such-package==1.0"],
                            capture_output=True, text=True, timeout=120)
    assert absent.returncode != 0 and "kperf-no-such-package" in absent.stderr


def test_a_test_session_removes_its_cache_folder(tmp_path: Path) -> None:
    """Every run left /tmp/kperf-test-cache-* (4 in a passing run): a session removes the
    folder it made, and a pytest started inside it (the mutation run) makes none."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in (CACHE_ENV, "TRITON_CACHE_DIR", "TILELANG_CACHE_DIR", "ASV_ENV_DIR")}
    env["TMPDIR"] = str(tmp)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
           "tests/test_shared_machine.py"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [p.name for p in tmp.iterdir() if p.name.startswith("kperf-")] == []
    parents = tmp_path / "parent-cache"  # a session's folder, named to the pytest inside it
    parents.mkdir()
    inner = subprocess.run(cmd, cwd=REPO, env=dict(env, **{CACHE_ENV: str(parents)}),
                           capture_output=True, text=True, timeout=300)
    assert inner.returncode == 0, inner.stdout[-2000:] + inner.stderr[-2000:]
    assert parents.is_dir(), "a pytest inside a session removed the session's cache folder"
    assert [p.name for p in tmp.iterdir() if p.name.startswith("kperf-")] == []
