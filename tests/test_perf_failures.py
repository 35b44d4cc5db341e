"""``kperf perf``: a crash, hang, exception or wrong result in one case is that case's
failure, with what went wrong; the run goes on, in a fresh worker where the last one died
(kperf/history/perf.py over the measurement worker, kperf/core/worker.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kperf.core import checks
from kperf.core.worker import run_workers
from kperf.history import perf

from .conftest import REPO


def test_each_failure_stays_with_its_case(tmp_path: Path, capsys) -> None:
    cases = ["ok-1", "raise", "ok-2", "nan", "ok-3", "hang", "ok-4", "crash", "ok-5"]
    specs = [{"op": "op", "case": c, "dtype": "fp16", "backend": "triton"} for c in cases]
    args = argparse.Namespace(timeout=5.0, out=tmp_path / "perf.json")
    with run_workers("kperf-test-perf-") as folder:
        rows = perf.run_specs(specs, args, handler="tests._perf_cases:handle")
    assert not folder.exists()  # the run's worker stopped and its folder removed
    assert [r["case"] for r in rows] == cases
    status = {r["case"]: r["status"] for r in rows}
    assert status == {"ok-1": "ok", "raise": "error", "ok-2": "ok", "nan": "error",
                      "ok-3": "ok", "hang": "failed", "ok-4": "ok", "crash": "failed",
                      "ok-5": "ok"}
    by_case = {r["case"]: r for r in rows}
    assert "compile error in kernel X" in by_case["raise"]["error"]
    assert "WrongResult" in by_case["nan"]["error"] and "NaN" in by_case["nan"]["error"]
    assert "op/nan-case/fp16/triton" in by_case["nan"]["error"]
    assert "gave no answer within" in by_case["hang"]["error"]
    assert "died" in by_case["crash"]["error"]
    # a wrong result leaves the worker serving; an exception, a hang and a crash end it
    # the worker runs in its own folder and still finds the project (found on the GPU:
    # every op case failed "no kperf.toml in /tmp/kperf-w-.../kperf-perf-..." before)
    assert {by_case[f"ok-{i}"]["project"] for i in range(1, 6)} == {str(REPO)}
    pids = [by_case[f"ok-{i}"]["pid"] for i in range(1, 6)]
    assert pids[1] == pids[2] and len(set(pids)) == 4, pids
    out = capsys.readouterr().out
    assert "FAILED: measurement worker" in out and "ERROR: " in out


def test_compare_rejects_mismatch_and_accepts_agreement():
    import torch

    ref = torch.linspace(-1, 1, 100)
    agreement = checks.compare(ref + 1e-4, ref, rtol=1e-3, atol=1e-3)
    assert agreement.mismatched == 0 and agreement.max_abs_err == pytest.approx(1e-4, rel=1e-2)
    with pytest.raises(checks.WrongResult, match="3 of 100 values outside"):
        bad = ref.clone()
        bad[[1, 5, 9]] += 1.0
        checks.compare(bad, ref, rtol=1e-3, atol=1e-3)
    with pytest.raises(checks.WrongResult, match="shape"):
        checks.compare(ref[:10], ref, rtol=1e-3, atol=1e-3)
    with pytest.raises(checks.WrongResult, match="NaN or Inf"):
        checks.compare(torch.full((4,), float("inf")), torch.zeros(4), rtol=1, atol=1)
