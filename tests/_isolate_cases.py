"""Cases for tests/test_isolate.py, importable by a spawned worker."""

from __future__ import annotations

import os
import time

# imported with the module, in the fresh worker's time (``first_timeout_s``): imported in
# the "nan" case, torch's import alone outlasted the case's 5 s under a load average of 6
# (tests/test_isolate.py, beside another checkout's main job and gate, 2026-12-06)
import torch

from kperf.core import checks


def run(case: str) -> object:
    if case.startswith("ok"):
        return {"case": case, "pid": os.getpid()}
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
