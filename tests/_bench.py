"""What the CPU runs of the timed suites share (the ``cpu_bench`` fixture, tests/conftest.py)."""

from __future__ import annotations

from typing import Any

BENCH_PLAN = {"trials": 3, "min_trial_s": 0.01, "min_reps": 2, "warmup_min_s": 0,
              "warmup_max_s": 0, "energy_s": 0}
BENCH_CASE = ("test-ragged", "fp16", "triton")  # gemm's small CPU case: M 96, N 80, K 72


class _PlanWorker:
    """A measurement worker that keeps the requests it is sent and measures nothing."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.requests.append(message)
        return {"fresh": False, "samples": [1.0], "number": 1}


def asked_plans(suites: list[Any], spec: dict[str, str]) -> list[dict[str, Any]]:
    """The plan each suite (a Time or Energy suite of one op) asks its worker to measure
    ``spec`` with, its plan made as ``setup`` makes it (KPERF_PLAN as the test sets it)."""
    plans = []
    for suite in suites:
        suite.spec, suite.worker = dict(spec), _PlanWorker()
        suite.plan = suite._plan()
        suite._measure()
        plans.append(suite.worker.requests[0]["plan"])
    return plans
