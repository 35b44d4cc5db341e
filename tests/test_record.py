"""Records are written atomically: a write that fails half-way leaves the old file (or
none), never half a file, and no temporary file behind.

The failure is a real one: a child process writes under ``RLIMIT_FSIZE`` (the kernel
refuses every byte past the limit with EFBIG, whatever Python call writes it), as a full
disk or a kill in the middle of the write would cut it.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.core import record

REPO = Path(__file__).resolve().parent.parent
LIMIT = 64 * 1024  # bytes a file may grow to in the child; the payload is ~2 MB of JSON
CHILD = """
import json, os, resource, signal, sys
from pathlib import Path
from kperf.core import record

mode, target = sys.argv[1], Path(sys.argv[2])
payload = {"samples": [0.1 * i for i in range(100_000)]}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a core dump
resource.setrlimit(resource.RLIMIT_FSIZE,
                   (int(sys.argv[3]), resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    if mode == "atomic":
        record.atomic_write_json(target, payload)
    else:
        record.write_record("bench_x.XTime.track_time", {"case": "c"}, payload, root=target)
except OSError as err:
    print(json.dumps({"errno": err.errno}))
else:
    print(json.dumps({"errno": None}))
"""


def _write_cut(mode: str, target: Path) -> int | None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "KPERF_MACHINE": "m1",
           "ASV_COMMIT": "abcdef0123456789", "ASV_ENV_NAME": "env"}
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(target), str(LIMIT)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["errno"]


def test_a_cut_rewrite_leaves_the_old_file_whole_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    record.atomic_write_json(path, {"old": True})
    old = path.read_bytes()
    assert _write_cut("atomic", path) == errno.EFBIG
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["figures.json"]


def test_a_cut_record_leaves_no_file(tmp_path: Path) -> None:
    root = tmp_path / "records"
    assert _write_cut("record", root) == errno.EFBIG
    assert [p for p in root.rglob("*") if p.is_file()] == []


def test_a_record_under_the_limit_is_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KPERF_MACHINE", "m1")
    monkeypatch.setenv("ASV_COMMIT", "abcdef0123456789")
    monkeypatch.setenv("ASV_ENV_NAME", "env")
    path = record.write_record("bench_x.XTime.track_time", {"case": "c"}, {"samples": [1.0]},
                               root=tmp_path)
    assert path.parent == tmp_path / "m1" / "abcdef01-env" / "bench_x.XTime.track_time"
    (rec,) = record.read_records(tmp_path)
    assert rec.pop("kperf").startswith("kperf ")  # the instrument that wrote it
    assert rec == {"schema": "kperf-record-2", "benchmark": "bench_x.XTime.track_time",
                   "params": {"case": "c"}, "machine": "m1", "commit": "abcdef0123456789",
                   "env_name": "env", "samples": [1.0]}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_a_record_knows_its_commit_where_asv_did_not_say_it(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    """asv builds one environment for the variants of an env_nobuild matrix (a gfx942
    toolchain each) and sets ASV_COMMIT for the first only: the others' records were
    "nocommit", and their compiles were skipped as timed at commit None. The commit
    installed in the environment (asv's own install status) is the one measured."""
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    sha = "7613a5b0f9e6f9db74c9ed5defc7dcf8df7b25cc"
    (env_dir / "asv-install-status.json").write_text(json.dumps({"commit_hash": sha}))
    monkeypatch.setenv("KPERF_MACHINE", "m")
    monkeypatch.setenv("ASV_ENV_NAME", "virtualenv-py3.11-KPERF_ROCM_TOOLCHAINrocm-7.2.2")
    monkeypatch.delenv("ASV_COMMIT", raising=False)
    monkeypatch.setenv("ASV_ENV_DIR", str(env_dir))
    path = record.write_record("b.S.track_value", {"target": "gfx942"}, {"kind": "codegen"},
                               tmp_path / "records")
    assert json.loads(path.read_text())["commit"] == sha
    assert path.parent.parent.name.startswith(sha[:8] + "-virtualenv")
    monkeypatch.setenv("ASV_COMMIT", "a" * 40)  # asv's word wins where it gives one
    assert record.commit_id() == "a" * 40
    monkeypatch.delenv("ASV_COMMIT")
    (env_dir / "asv-install-status.json").write_text("{not json")
    assert record.commit_id() is None
    monkeypatch.delenv("ASV_ENV_DIR")
    assert record.commit_id() is None

