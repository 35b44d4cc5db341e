"""Run many cases in a worker process, so one case's crash or hang is only that case's failure.

The worker is a spawned process (no inherited GPU context) that handles cases one at a
time and keeps its compilers and GPU context warm between them. If a case raises, the
worker reports the error and goes on. If it crashes (the process dies) or hangs (no
answer within the case's timeout), the parent records that, kills the worker, and
starts a fresh one for the remaining cases.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    case: Any
    status: str  # "ok" | "error" | "crashed" | "timeout"
    result: Any = None
    error: str = ""
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _resolve(path: str) -> Callable[[Any], Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _worker(func_path: str, conn) -> None:
    func = _resolve(func_path)
    while True:
        case = conn.recv()
        if case is None:
            return
        try:
            conn.send(("ok", func(case), ""))
        except BaseException as err:  # the case failed; the worker lives on
            conn.send(("error", None, f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))


class _Worker:
    def __init__(self, func_path: str) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(func_path, child), daemon=True)
        self.proc.start()
        child.close()

    def ask(self, case: Any, timeout_s: float) -> tuple[str, Any, str]:
        self.conn.send(case)
        if not self.conn.poll(timeout_s):
            return "timeout", None, f"no answer within {timeout_s:.0f} s"
        try:
            return self.conn.recv()
        except EOFError:
            self.proc.join(5)
            return "crashed", None, f"worker died (exit code {self.proc.exitcode})"

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def run_isolated(func_path: str, cases: Iterable[Any], timeout_s: float = 600.0,
                 first_timeout_s: float | None = None) -> Iterator[Outcome]:
    """Yield one ``Outcome`` per case, in order, whatever happens to any of them.

    ``func_path`` is ``"package.module:function"``; the function takes one case and
    returns a picklable result. ``first_timeout_s`` covers a fresh worker's imports.
    """
    worker: _Worker | None = None
    try:
        for case in cases:
            fresh = worker is None
            if worker is None:
                worker = _Worker(func_path)
            limit = (first_timeout_s or timeout_s) if fresh else timeout_s
            start = time.perf_counter()
            status, result, error = worker.ask(case, limit)
            outcome = Outcome(case, status, result, error, time.perf_counter() - start)
            if status in ("timeout", "crashed"):
                worker.kill()
                worker = None
            yield outcome
    finally:
        if worker is not None:
            worker.close()
