"""Run a handler over many requests in a few fresh processes, for host work done ahead.

A measurement worker compiles a cold op's kernels one case at a time, ~5 s each for a
TileLang kernel (nvcc), while the GPU waits. Compiles are host work and independent, so
the worker hands the rest of the op's kernels to this pool: each child process takes the
client's ``sys.path`` and suite package (as ``kperf.core.workerproc`` does), loads the
handler by name (the measurement core never imports the code under test) and answers its
share of the requests, one JSON line each. The compilers' on-disk caches carry the
results back; a request that fails is reported, not raised, so the case meets its error
again in its own turn.

    results = run_many("kperf.suites.case:build_only", requests, processes=8,
                       sys_path=sys.path, preload=".../benchmarks/__init__.py")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf.core.worker import CLIENT_PYTHONPATH, register_package

KPERF_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding kperf


def run_many(handler: str, requests: Sequence[dict[str, Any]], processes: int,
             sys_path: Sequence[str], preload: str | None = None,
             timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """One answer per request, in order: ``{"ok": True, "result": ...}`` or ``{"ok": False,
    "error": ...}``; the requests of a child that crashed or ran past ``timeout_s`` (it is
    killed) get an error naming that."""
    processes = max(1, min(processes, len(requests)))
    shares = [list(range(i, len(requests), processes)) for i in range(processes)]
    env = dict(os.environ)
    if "PYTHONPATH" in env:
        env[CLIENT_PYTHONPATH] = env["PYTHONPATH"]
    env["PYTHONPATH"] = KPERF_ROOT
    answers: list[dict[str, Any]] = [{"ok": False, "error": "not run"} for _ in requests]
    with tempfile.TemporaryDirectory(prefix="kperf-pool-") as folder:
        children: list[tuple[list[int], Path, subprocess.Popen]] = []
        try:
            for n, share in enumerate(shares):
                job, out = Path(folder) / f"job-{n}.json", Path(folder) / f"out-{n}.jsonl"
                job.write_text(json.dumps({"handler": handler, "sys_path": list(sys_path),
                                           "preload": preload,
                                           "requests": [requests[i] for i in share]}))
                with out.open("w") as sink:
                    children.append((share, out, subprocess.Popen(
                        [sys.executable, "-m", "kperf.core.pool", str(job)], env=env,
                        stdout=sink, stderr=subprocess.STDOUT)))
            deadline = time.monotonic() + timeout_s
            for share, out, child in children:
                try:
                    code = child.wait(max(0.0, deadline - time.monotonic()))
                    why = f"the process exited with {code}"
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    why = f"the process ran past {timeout_s:.0f} s and was killed"
                _collect(share, out.read_text().splitlines(), why, answers)
        finally:
            for _, _, child in children:  # an interrupted caller leaves no compiles behind
                if child.poll() is None:
                    child.kill()
                    child.wait()
    return answers


def _collect(share: list[int], lines: list[str], why: str,
             answers: list[dict[str, Any]]) -> None:
    """A child's answer lines, in its share's order; the rest of its share failed."""
    done = []
    for line in lines:
        if line.startswith('{"ok"'):
            try:
                done.append(json.loads(line))
            except ValueError:  # cut short by the kill
                break
    for i, answer in zip(share, done, strict=False):
        answers[i] = answer
    for i in share[len(done):]:
        answers[i] = {"ok": False, "error": f"{why} before answering; its output ended: "
                                            f"{' | '.join(lines[-5:])}"}


def _serve(job: dict[str, Any]) -> None:
    sys.path[:] = list(job["sys_path"])
    client_path = os.environ.pop(CLIENT_PYTHONPATH, None)
    if client_path is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = client_path
    if job["preload"]:
        register_package(job["preload"])
    from kperf.core.workerproc import _load_handler

    handler = _load_handler(job["handler"])
    for request in job["requests"]:
        try:
            answer = {"ok": True, "result": handler(request)}
        except Exception as err:  # reported per request; the next one runs
            answer = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        print(json.dumps(answer, default=str), flush=True)


if __name__ == "__main__":
    _serve(json.loads(Path(sys.argv[1]).read_text()))
