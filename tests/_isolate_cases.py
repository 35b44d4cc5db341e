"""Cases for tests/test_isolate.py, importable by a spawned worker."""

from __future__ import annotations

import os
import time


def run(case: str) -> object:
    if case.startswith("ok"):
        return {"case": case, "pid": os.getpid()}
    if case == "raise":
        raise RuntimeError("compile error in kernel X")
    if case == "nan":
        import torch

        from harness import checks

        checks.compare(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), 1e-3, 1e-3,
                       "op/nan-case/fp16/triton")
    if case == "hang":
        time.sleep(3600)
    if case == "crash":
        os._exit(3)
    raise ValueError(f"unknown case {case!r}")
