"""Cases for tests/test_perf_failures.py, answered by a measurement worker (its handler)."""

from __future__ import annotations

import os
import time
from typing import Any

# imported with the module, in the fresh worker's time: imported in the "nan" case,
# torch's import alone outlasted the case's 5 s under a load average of 6 (beside another
# checkout's main job and gate, 2026-12-06)
import torch

from kperf.core import checks


def handle(request: dict[str, Any]) -> dict[str, Any]:
    spec = request["spec"]
    case = spec["case"]
    if case.startswith("ok"):
        from kperf import project

        return {**spec, "pid": os.getpid(), "median_s": 1e-6, "tflops": 0.0, "gbps": 0.0,
                "project": str(project.find().root)}  # as an op's registry finds it
    if case == "raise":
        raise RuntimeError("compile error in kernel X")
    if case == "nan":
        checks.compare(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), 1e-3, 1e-3,
                       "op/nan-case/fp16/triton")
    if case == "hang":
        time.sleep(3600)
    if case == "crash":
        os._exit(3)
    raise ValueError(f"unknown case {case!r}")
