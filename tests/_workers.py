"""Real measurement workers for the worker's tests (tests/conftest.py's ``workers``): a
private folder, a code package per test, the workers started and a reaper that keeps
each one's exit code. Handlers in tests/_worker_handlers.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kperf.core.worker import (
    WorkerClient,
    WorkerSpec,
    retire,
)

REPO = Path(__file__).resolve().parent.parent
HANDLER = f"{Path(__file__).with_name('_worker_handlers.py')}:handle"
TIMEOUT_S = 30.0


class Workers:
    """A private worker folder, a code package per test, the workers started, a reaper."""

    def __init__(self) -> None:
        # short: a socket's path must fit AF_UNIX's 108 bytes
        self.root = Path(tempfile.mkdtemp(prefix="kw-"))
        self.dir = self.root / "w"
        self.code = self.root / "code"
        self.write_code("toycode", 1)
        self.procs: dict[int, subprocess.Popen] = {}
        self.exits: dict[int, int | None] = {}  # pid: exit code, -signal, None: unknown
        self.script = ""  # instead of ``-m kperf.core.workerproc``, when set
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def write_code(self, package: str, version: int, note: str = "") -> None:
        (self.code / package).mkdir(parents=True, exist_ok=True)
        (self.code / package / "__init__.py").write_text(f"VERSION = {version}  {note}\n")

    def spec(self, package: str = "toycode", slot: str = "") -> WorkerSpec:
        return WorkerSpec(handler=HANDLER, sys_path=(str(self.code), str(REPO)),
                          packages=(package,), device="kperf-test", slot=slot, label="test")

    def client(self, package: str = "toycode", slot: str = "", idle_s: float = 30.0):
        return WorkerClient(self.spec(package, slot), idle_s=idle_s)

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        """The client's ``subprocess.Popen``: starts the worker, and keeps it for the reaper."""
        if self.script:
            assert cmd[1:3] == ["-m", "kperf.core.workerproc"], cmd
            cmd = [cmd[0], self.script, *cmd[3:]]
        proc = subprocess.Popen(cmd, **kw)
        self.procs[proc.pid] = proc
        return proc

    def pid(self, client: WorkerClient) -> int:
        pid = client.request({"op": "pid"}, TIMEOUT_S)["pid"]
        assert pid in self.procs  # the process the client started answers
        return pid

    def _reap(self) -> None:
        while not self._stop.wait(0.02):
            for pid, proc in list(self.procs.items()):
                if pid in self.exits:
                    continue
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # the client reaped it: its status is the client's
                    done, status = pid, None
                if done:
                    code = None if status is None else os.waitstatus_to_exitcode(status)
                    proc.returncode = -1 if code is None else code  # Popen: nothing to wait for
                    self.exits[pid] = code

    def ended(self, pid: int, within_s: float = 5.0) -> int | str | None:
        """How the worker ``pid`` ended: its exit code, minus the signal that killed it, or
        None when the client reaped it; "running" if it has not ended within ``within_s``."""
        deadline = time.monotonic() + within_s
        while pid not in self.exits:
            if time.monotonic() >= deadline:
                return "running"
            time.sleep(0.02)
        return self.exits[pid]

    def running(self, pid: int) -> bool:
        return self.ended(pid, within_s=0) == "running"

    def close(self) -> None:
        if self.dir.exists():
            retire(self.dir)
        for pid, proc in self.procs.items():  # one the client lost track of (a failed test)
            if self.ended(pid, within_s=0.1) == "running":
                proc.kill()
        for pid in self.procs:
            self.ended(pid)
        self._stop.set()
        self._reaper.join()
        shutil.rmtree(self.root)
