"""The gate's threads: pools that end at once when a run is cut off.

A run is cut off by SIGTERM (a CI timeout, a device call's limit) or Ctrl-C, both raised
as KeyboardInterrupt in the main thread (kperf/gate/cli.py). After a device call's
SIGTERM on an H200 the gate of that time measured the rest of its round, 8 blocks in
11 s, the first 20% slow (docs/journal/2026-12-01.md, "Late night of 2026-12-01"): the main thread
slept in a wait that only the round's end ended, and nothing told the round to stop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

POLL_S = 0.2  # how soon a signal reaches a main thread that waits for jobs


def join(jobs: Sequence[Future[Any]]) -> None:
    """Wait for ``jobs`` in short steps, so that a signal is handled at once rather than
    when they end; then raise what a job raised."""
    pending = set(jobs)
    while pending:
        pending = wait(pending, timeout=POLL_S).not_done
    for job in jobs:
        job.result()


@contextlib.contextmanager
def threads(workers: int, stopping: threading.Event) -> Iterator[ThreadPoolExecutor]:
    """A pool whose run, once cut off, sets ``stopping`` (its jobs check it before each
    block), drops the jobs not yet started, and waits only for those running."""
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    except BaseException:
        stopping.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
