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

from harness import record

REPO = Path(__file__).resolve().parent.parent
LIMIT = 64 * 1024  # bytes a file may grow to in the child; the payload is ~2 MB of JSON
CHILD = """
import json, os, resource, signal, sys
from pathlib import Path
from harness import record

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
    assert record.read_records(tmp_path) == [{
        "schema": "kperf-record-2", "benchmark": "bench_x.XTime.track_time",
        "params": {"case": "c"}, "machine": "m1", "commit": "abcdef0123456789",
        "env_name": "env", "samples": [1.0]}]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
