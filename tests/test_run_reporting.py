"""What a long run tells its user: an ETA from asv's progress, a summary at the end, and
how each case's kernel came to be (compiled or from the cache keyed by kernel source)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks._case import cache_files, compile_note
from tools.asvrun import ETA_EVERY_S, Eta
from tools.bench import summary


def test_eta_from_asvs_progress_lines() -> None:
    now = [0.0]
    eta = Eta(clock=lambda: now[0])
    now[0] = ETA_EVERY_S + 1
    assert eta.update("· Creating environments") is None
    assert eta.update("[ 25.00%] ··· bench_gemm.GemmTime.track_time   ok") == (
        "kperf: 25% of the run done after 31 s; about 1 min 33 s left")
    now[0] += 1
    assert eta.update("[ 50.00%] ··· x") is None, "at most one line every ETA_EVERY_S"
    now[0] = 10 * 60
    assert eta.update("[100.00%] ··· x").endswith("about 0 s left")


def test_summary_counts_every_case_of_the_runs_commits(tmp_path: Path) -> None:
    columns = ["result", "params", "samples"]
    rows = {"b.T.track_time": [[1e-3, None, float("nan")], [["'a'", "'b'", "'c'"]],
                               [[1e-3], None, None]],
            "b.R.track_value": [64.0, [], None]}
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "env_name": "env", "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 90.0)
    assert text.startswith("kperf: 4 cases over 1 commit(s): 2 ok, 1 failed, 1 skipped")
    assert "1.5 min" in text and "30.0 s a case run" in text


def test_compile_notes_and_the_cache_count(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    assert cache_files() == 0
    (tmp_path / "triton" / "k1").mkdir(parents=True)
    (tmp_path / "triton" / "k1" / "kernel.cubin").write_bytes(b"x")
    assert cache_files() == 1
    assert compile_note(True, 3, 2.5).startswith("compiled (3 new cache files")
    assert compile_note(True, 0, 0.3).startswith("from the compile cache")
    assert compile_note(False, 0, 0.0) == "already built in this worker"
