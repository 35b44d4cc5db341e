"""The measurement worker's own process: serve requests until told to stop, idle, stale,
or after a failed request (the rules are in kperf/core/worker.py, the client's side).

Started by ``WorkerClient`` as ``python -m kperf.core.workerproc --socket ... --spec ...`` with
only the measurement core's folder on ``PYTHONPATH``; it then takes the client's
``sys.path`` (so the code under test comes from where the client's does), registers the
suite package by path (as asv does), and answers requests with the handler the spec
names.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any

from kperf.core.pidfile import alive
from kperf.core.worker import CLIENT_PYTHONPATH, DEFAULT_IDLE_S, WorkerSpec, register_package
from kperf.core.workerauth import UntrustedWorker, check_peer, read_key


class _Idle:
    def __init__(self, idle_s: float) -> None:
        self.idle_s, self.last, self.busy = idle_s, time.monotonic(), False
        self.lock = threading.Lock()

    def expired(self) -> bool:
        with self.lock:
            return not self.busy and time.monotonic() - self.last > self.idle_s

    def set_busy(self, busy: bool) -> None:
        with self.lock:
            self.busy, self.last = busy, time.monotonic()


def _load_handler(spec: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def _survivable(err: BaseException) -> bool:
    """Errors after which the worker's GPU context is known to be fine."""
    return isinstance(err, NotImplementedError) or getattr(err, "worker_survives", False)


def serve(address: str, authkey: bytes, spec: WorkerSpec, idle_s: float,
          owner: str | None = None) -> None:
    """Answer requests until told to stop, idle, stale, after a failed request, or once the
    run that owns it (``owner``, kperf/core/pidfile.py ``process_identity``) is gone."""
    code = spec.code()
    idle = _Idle(idle_s)
    listener = Listener(address, family="AF_UNIX", authkey=authkey)

    def watchdog() -> None:
        while not idle.expired():
            if owner and not alive(owner):
                _orphaned(Path(address))
            time.sleep(min(1.0, idle_s / 4))
        with contextlib.suppress(OSError):
            os.unlink(address)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True, name="kperf-idle").start()
    try:
        _serve_loop(listener, spec, code, idle)
    finally:
        with contextlib.suppress(OSError):
            listener.close()  # also removes the socket file


def _orphaned(sock: Path) -> None:
    """The run was killed before it could stop this worker: remove this worker's files,
    and the run's folder once it is empty, then exit."""
    for suffix in (".sock", ".key", ".pid", ".lock", ".log"):
        with contextlib.suppress(OSError):
            sock.with_suffix(suffix).unlink()
    with contextlib.suppress(OSError):
        sock.parent.rmdir()
    os._exit(0)


def _serve_loop(listener: Listener, spec: WorkerSpec, code: str, idle: _Idle) -> None:
    handler: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    while True:
        try:
            conn = listener.accept()
            check_peer(conn, listener.address)
        except (OSError, EOFError, AuthenticationError, UntrustedWorker):
            continue  # a client without the key or of another user, or one that hung up
        idle.set_busy(True)
        try:
            request = conn.recv()
            if request.get("op") == "shutdown":
                conn.send({"ok": True})
                return
            if spec.code() != code:
                conn.send({"ok": False, "stale": True, "message": "code under test changed"})
                return
            if request.get("op") == "hello":
                conn.send({"ok": True, "pid": os.getpid(), "code": code, "label": spec.label})
                continue
            if handler is None:
                handler = _load_handler(spec.handler)
            stop = _answer(conn, handler, request)
            if stop:
                return
        except (EOFError, OSError):
            pass  # the client went away (asv's timeout killed it): keep serving
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            idle.set_busy(False)


def _answer(conn: Connection, handler: Callable[[dict[str, Any]], dict[str, Any]],
            request: dict[str, Any]) -> bool:
    """Run one request; True when the worker must exit after it."""
    try:
        result = handler(request)
    except BaseException as err:
        conn.send({"ok": False, "skip": isinstance(err, NotImplementedError),
                   "error_type": type(err).__name__, "message": str(err),
                   "traceback": traceback.format_exc()})
        return not _survivable(err) or isinstance(err, KeyboardInterrupt | SystemExit)
    conn.send({"ok": True, "result": result})
    return False


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--idle", type=float, default=DEFAULT_IDLE_S)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--owner", help="the run's process (pid:start): exit when it is gone")
    args = parser.parse_args(argv)
    raw = json.loads(args.spec)
    spec = WorkerSpec(**{**raw, "sys_path": tuple(raw["sys_path"]),
                          "packages": tuple(raw.get("packages", ()))})
    sys.path[:] = list(spec.sys_path)
    client_path = os.environ.pop(CLIENT_PYTHONPATH, None)
    if client_path is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = client_path
    if spec.preload:
        register_package(spec.preload)
    serve(args.socket, read_key(Path(args.key_file)), spec, args.idle, args.owner)


if __name__ == "__main__":
    main(sys.argv[1:])
