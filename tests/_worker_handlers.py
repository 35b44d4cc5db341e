"""Handlers for tests/test_worker*.py, loaded by a measurement worker from this file's path.

``toycode`` is the test's stand-in for the code under test (``kernels``): the worker
imports it from the client's ``sys.path`` and fingerprints its files.
"""

from __future__ import annotations

import os
import time

from kperf.core import checks


def handle(request: dict) -> dict:
    op = request["op"]
    if op == "pid":
        import toycode

        return {"pid": os.getpid(), "version": toycode.VERSION}
    if op == "environ":
        return {k: os.environ.get(k) for k in request["keys"]}
    if op == "raise":
        raise RuntimeError("compile error in kernel X")
    if op == "skip":
        raise NotImplementedError("op 'toy' has no case 'x' at this commit")
    if op == "wrong":
        raise checks.WrongResult("toy/x/fp16/triton: 3 of 100 values outside rtol=0.01")
    if op == "crash":
        print("last words before the crash", flush=True)
        os._exit(3)
    if op == "hang":
        print("hanging in kernel Y", flush=True)
        time.sleep(3600)
    return {"echo": request}  # answers anything: "shutdown" must be the worker's own
