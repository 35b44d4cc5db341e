"""A crash, hang, exception or wrong result in one case is that case's failure; the run goes on."""

from __future__ import annotations

import pytest

from kperf.core import checks
from kperf.core.isolate import run_isolated


def test_each_failure_stays_with_its_case():
    cases = ["ok-1", "raise", "ok-2", "nan", "hang", "ok-3", "crash", "ok-4"]
    outcomes = list(run_isolated("tests._isolate_cases:run", cases, timeout_s=5,
                                 first_timeout_s=60))
    assert [o.case for o in outcomes] == cases
    status = {o.case: o.status for o in outcomes}
    assert status == {"ok-1": "ok", "raise": "error", "ok-2": "ok", "nan": "error",
                      "hang": "timeout", "ok-3": "ok", "crash": "crashed", "ok-4": "ok"}
    by_case = {o.case: o for o in outcomes}
    assert "compile error in kernel X" in by_case["raise"].error
    assert "WrongResult" in by_case["nan"].error and "NaN" in by_case["nan"].error
    assert "op/nan-case/fp16/triton" in by_case["nan"].error
    assert "exit code 3" in by_case["crash"].error
    # a worker survives exceptions, but is replaced after a hang and after a crash
    pids = [by_case[c].result["pid"] for c in ("ok-1", "ok-2", "ok-3", "ok-4")]
    assert pids[0] == pids[1] and len(set(pids)) == 3


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
