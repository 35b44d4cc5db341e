"""The fault suite (docs/reliability.md): interruptions of kperf.history.bench, of asv underneath it
and of publish, with a stand-in asv (tests/fake_asv) so that each case takes a second.

What must hold in every case: what was recorded before the fault is still there and whole
(results, per-sample records), nothing is published from a broken run, and the tool leaves
no temporary file behind (a SIGKILL of the tool itself can leave only its hash file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
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

from tests.conftest import ignore_sigint

REPO = Path(__file__).resolve().parent.parent
FAKE_ASV = REPO / "tests" / "fake_asv"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# kperf.history.bench with the slow probes replaced (no torch import, no ~/.asv-machine.json) and
# every path under the test's folder instead of the repository
BENCH_DRIVER = f"""
import signal, sys
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal (_bench)
from kperf.history import asvrun, bench
root = Path(sys.argv[1])
real_env = asvrun.asv_env
bench.has_gpu = lambda: False
bench.commits = lambda spec, repo: [{COMMIT!r}]
bench.asv_env = lambda machine, cpu_only=False: real_env(machine, root, cpu_only)
bench.machine_tool.describe = lambda name=None: {{"machine": "fault-box", "gpu": "none",
                                                 "gpu_arch": ""}}
bench.machine_tool.write_machine_file = lambda info: None
sys.exit(bench.main(sys.argv[2:]))
"""


def _env(root: Path, **fake: str) -> dict[str, str]:
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    return dict(os.environ, PYTHONPATH=f"{FAKE_ASV}{os.pathsep}{REPO}", TMPDIR=str(tmp),
                FAKE_ASV_ROOT=str(root), KPERF_PROJECT=str(root),
                **{f"FAKE_ASV_{k.upper()}": v for k, v in fake.items()})


def _seed(root: Path) -> dict[str, str]:
    """The project's config, earlier results and records that no fault may touch; their
    digests."""
    (root / "asv.conf.json").write_text((REPO / "asv.conf.json").read_text())
    (root / "kperf.toml").write_text((REPO / "kperf.toml").read_text())
    old = {root / ".asv" / "results" / "fault-box" / "aaaaaaaa-fake-env.json": {"old": 1},
           root / ".asv" / "records" / "fault-box" / "aaaaaaaa-fake-env" / "b" / "r.json":
               {"schema": "kperf-record-1", "benchmark": "b", "params": {},
                "machine": "fault-box", "samples": [1.0]}}
    for path, data in old.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    return _digests(root)


def _digests(root: Path) -> dict[str, str]:
    """What the project has recorded (the run's HASHFILE, its own while it lasts, aside)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / ".asv").rglob("*"))
            if p.is_file() and not p.name.startswith("kperf-hashes-")}


def _records(root: Path) -> list[dict]:
    """Every record, parsed: a truncated one fails here."""
    return [json.loads(p.read_text()) for p in sorted((root / ".asv" / "records").rglob("*.json"))]


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_tool_outlives_its_test() -> Iterator[None]:
    """A test that failed (a timeout) leaves no tool or fake asv running beside the tests
    that follow: each one's process group is killed."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def _bench(root: Path, *args: str, **fake: str) -> subprocess.Popen:
    """The tool in a session of its own, started with SIGINT ignored, as a non-interactive
    shell starts a background job (``bash tools/test.sh &`` beside a main job): the driver
    gives it Python's Ctrl-C handler, as a terminal's foreground job has it. Inherited
    ignored, SIGINT did nothing and the Ctrl-C tests waited out their 60 s (issue 45)."""
    proc = subprocess.Popen([sys.executable, "-c", BENCH_DRIVER, str(root), *args], cwd=REPO,
                            env=_env(root, **fake), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=ignore_sigint)
    _STARTED.append(proc)
    return proc


def _wait_ready(proc: subprocess.Popen, root: Path, within_s: float = 60.0) -> None:
    """Until the fake asv is inside its sleep: it says so with a file, since publish
    holds asv's output until asv ends."""
    deadline = time.monotonic() + within_s
    while not (root / "asv-ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the fake asv never got ready: {proc.communicate()[1]}")
        time.sleep(0.05)


def _leftover_tmp(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "tmp").iterdir())


def test_bench_leaves_no_hash_file_behind(tmp_path: Path) -> None:
    before = _seed(tmp_path)
    proc = _bench(tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert _leftover_tmp(tmp_path) == [], "kperf.history.bench left its HASHFILE in $TMPDIR"
    assert not list((tmp_path / ".asv").glob("kperf-hashes-*")), "nor in the project's .asv"
    assert "HASHFILE:" in (tmp_path / "asv-calls.log").read_text()
    assert (tmp_path / "html" / "index.json").exists()
    after = _digests(tmp_path)
    assert {k: after[k] for k in before} == before
    assert len(_records(tmp_path)) == 2


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_bench_stops_the_workers_its_run_started(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement worker that a benchmark started (kept warm for the next case, and
    idle for 90 s before it exits by itself) is stopped when kperf.history.bench's run ends; the
    run's worker folder is removed, the workers' logs moved to .asv/worker-logs."""
    _seed(tmp_path)
    workers = Path(tempfile.mkdtemp(prefix="kperf-ft-"))  # short: a socket path < 108 bytes
    monkeypatch.setenv("KPERF_WORKER_DIR", str(workers))
    monkeypatch.delenv("KPERF_WORKER_IDLE_S", raising=False)
    proc = _bench(tmp_path, worker="1")
    pid = None
    try:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        pid = int((tmp_path / "worker.pid").read_text().split()[0])
        assert not _running(pid), "the run's measurement worker outlived kperf.history.bench"
        folder = Path((tmp_path / "worker-dir").read_text())
        assert folder.parent == workers, "the run's workers had no folder of their own"
        assert not folder.exists(), sorted(folder.iterdir())
        assert [p.suffix for p in (tmp_path / ".asv" / "worker-logs").iterdir()] == [".log"]
    finally:
        if pid is not None and _running(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workers)


def test_ctrl_c_during_asv_run(tmp_path: Path) -> None:
    """SIGINT to the foreground process group (Ctrl-C): tool and asv stop; the record
    written before stays whole, nothing is published, the hash file is removed."""
    before = _seed(tmp_path)
    proc = _bench(tmp_path, run="sleep")
    _wait_ready(proc, tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, out + err
    assert _leftover_tmp(tmp_path) == [], "Ctrl-C left the HASHFILE behind"
    assert not (tmp_path / "html").exists(), "published after an interrupted run"
    after = _digests(tmp_path)
    assert {k: after[k] for k in before} == before
    assert sorted(str(r["params"]) for r in _records(tmp_path)) == ["{'case': 'first'}", "{}"]


def test_sigterm_during_asv_run_stops_the_workers(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM to the process group (what ``timeout``, a CI cancel or a device call's limit
    sends) while a benchmark's worker is warm: the tool stops it before exiting, as at a
    run's end. On an H200 (vm-nvidia-h200-f42b2886, 2026-12-04) a cut asv step left its
    worker holding 31 GiB, and the next step's workers ran out of GPU memory."""
    before = _seed(tmp_path)
    workers = Path(tempfile.mkdtemp(prefix="kperf-ft-"))  # short: a socket path < 108 bytes
    monkeypatch.setenv("KPERF_WORKER_DIR", str(workers))
    monkeypatch.delenv("KPERF_WORKER_IDLE_S", raising=False)
    proc = _bench(tmp_path, run="sleep", worker="1")
    pid = None
    try:
        _wait_ready(proc, tmp_path)
        pid = int((tmp_path / "worker.pid").read_text().split()[0])
        assert _running(pid)
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, out + err
        assert "cut off by SIGTERM" in err, err
        assert not _running(pid), "a cut run's measurement worker outlived kperf.history.bench"
        assert _leftover_tmp(tmp_path) == [], "SIGTERM left the HASHFILE behind"
        assert not (tmp_path / "html").exists(), "published after a cut run"
        after = _digests(tmp_path)
        assert {k: after[k] for k in before} == before
        assert sorted(str(r["params"]) for r in _records(tmp_path)) == ["{'case': 'first'}", "{}"]
    finally:
        if pid is not None and _running(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workers)


def test_asv_killed_under_the_tool(tmp_path: Path) -> None:
    """SIGKILL of asv underneath: the tool reports the failure, publishes nothing, keeps
    what asv recorded before it died, removes its hash file."""
    before = _seed(tmp_path)
    proc = _bench(tmp_path, run="kill")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "asv run failed" in err and "nothing published" in err, err
    assert not (tmp_path / "html").exists()
    assert _leftover_tmp(tmp_path) == []
    after = _digests(tmp_path)
    assert {k: after[k] for k in before} == before
    assert len(_records(tmp_path)) == 2


def test_tool_killed_while_asv_runs(tmp_path: Path) -> None:
    """SIGKILL of kperf.history.bench alone: asv underneath runs to its end and its records are
    whole; the hash file (in the project's .asv) is all a SIGKILL can leave (it cannot be
    caught): the run's worker folder is made by its first worker, and the fake asv starts
    none, so $TMPDIR holds nothing of the run."""
    before = _seed(tmp_path)
    proc = _bench(tmp_path, run="sleep", sleep="1")
    _wait_ready(proc, tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while len(_records(tmp_path)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    records = _records(tmp_path)
    assert sorted(str(r["params"]) for r in records) == [
        "{'case': 'first'}", "{'case': 'second'}", "{}"]
    assert _leftover_tmp(tmp_path) == []
    assert len(list((tmp_path / ".asv").glob("kperf-hashes-*.txt"))) == 1
    after = _digests(tmp_path)
    assert {k: after[k] for k in before} == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_publish_interrupted(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C or SIGKILL during publish: the site may be half written (the next publish
    rewrites it whole); results and records are only read by publish, never lost."""
    _seed(tmp_path)
    proc = _bench(tmp_path, publish="sleep")
    _wait_ready(proc, tmp_path)
    recorded = _digests(tmp_path)
    os.killpg(proc.pid, sig)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert _digests(tmp_path) == recorded
    if sig == signal.SIGINT:
        assert _leftover_tmp(tmp_path) == []


def test_every_row_of_the_fault_table_names_a_test_that_exists() -> None:
    """docs/reliability.md: each `file::name` (and `::name` continuing the same file) is a
    test function of that file; only the lead's TODO rows may lack one."""
    import re

    text = (REPO / "docs" / "reliability.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")
            and not line.startswith(("| fault", "| file"))]
    assert len(rows) >= 40
    for row in rows:
        cell = row.rstrip(" |").rsplit("|", 1)[-1]
        if "TODO" in row:
            continue
        current = None
        refs = re.findall(r"(tests/\w+\.py)?::(\w+)", cell)
        assert refs or "docs/security.md" in cell, row
        for path, name in refs:
            current = path or current
            assert current, row
            source = (REPO / current).read_text()
            assert re.search(rf"^def {name}\(", source, re.M), f"{current}::{name} is missing"
