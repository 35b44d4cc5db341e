"""A persistent measurement worker: one process per environment, code under test and GPU.

Starting a benchmark process costs seconds (Python, torch, the GPU context, TileLang's
import, loading or compiling the kernel, checking it) for about a second of timed trials
(docs/journal/2026-12-01.md, "Suite throughput"). So asv's benchmark processes do not measure
themselves: each asks a worker that keeps all of that warm, and the worker answers with
the samples. The rules that keep the numbers true stay:

- **Same code.** A worker is keyed by its Python, the fingerprint of the code under test
  it imports (every file of the installed ``kernels`` package: path, size, mtime) and the
  GPU. It re-checks the fingerprint on every request and refuses ("stale") once the files
  changed under it (asv installed another commit into the same environment); the client
  then starts a fresh worker. It imports with the client's ``sys.path``, so it measures
  exactly the package the client would have.
- **Failures stay with their case.** An exception in a request is that request's error,
  sent back to the client; after any exception but a skip or a wrong result the worker
  exits, because a GPU error can leave the context unusable. A crash (the process dies)
  or a hang (no answer within the request's timeout) is reported by the client as that
  case's failure, with the end of the worker's log, and the hung worker is killed. The
  next request starts a fresh worker.
- **One GPU, one worker at a time.** Workers of one group (Python and GPU) with other
  code are told to exit before a new one starts, so no idle worker holds the GPU's
  memory, and a worker exits by itself after ``idle_s`` without requests.

The worker serves any handler (``"path/to/file.py:function"`` or ``"module:function"``):
the measurement core never imports the code under test; kperf/suites/case.py is the
handler that does.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf.core.pidfile import read_pid, write_pid
from kperf.core.workerauth import (
    UntrustedWorker,
    WorkerError,
    checked,
    connect,
    private_dir,
    runtime_dir,
    worker_dir,
    write_key,
)

DEFAULT_IDLE_S = 90.0
START_TIMEOUT_S = 60.0
HELLO_TIMEOUT_S = 30.0
LOG_TAIL_BYTES = 4000
SOCKET_PATH_MAX = 107  # AF_UNIX's sun_path holds 108 bytes, the last a NUL
SOCKET_NAME_CHARS = 33  # "/<group>-<code>.sock" (WorkerSpec.name: 10 and 16 hex digits)
CLIENT_PYTHONPATH = "KPERF_CLIENT_PYTHONPATH"  # the client's PYTHONPATH, for the worker


class RemoteError(RuntimeError):
    """The request raised in the worker; the message carries its type and traceback."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(f"{reply['error_type']}: {reply['message']}\n"
                         f"--- in the measurement worker:\n{reply.get('traceback', '')}")
        self.error_type = reply["error_type"]


class RemoteSkip(NotImplementedError):
    """The worker says the case does not exist at this commit: asv records a skip."""


def package_fingerprint(packages: Sequence[str], search_path: Sequence[str]) -> str:
    """Digest of every file of each package as found on ``search_path`` (path, size,
    mtime): the code under test a worker imports.

    Cheap enough to check on every request (a few dozen ``stat`` calls), and it changes
    when pip reinstalls a package, which rewrites every file.
    """
    digest = hashlib.sha256()
    for package in sorted(packages):
        spec = importlib.machinery.PathFinder.find_spec(package, list(search_path))
        if spec is None or not spec.submodule_search_locations:  # nothing to watch
            digest.update(f"{package} not found\0".encode())
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        digest.update(f"{package}={root}\0".encode())
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                digest.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\0"
                              .encode())
    return digest.hexdigest()[:16]


VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def device_key(env: dict[str, str]) -> str:
    """Which GPU a process with this environment sees (a worker's group)."""
    key = ",".join(f"{k}={env[k]}" for k in VISIBILITY if k in env)
    return f"{key};{env.get('KPERF_DEVICE', 'gpu')}"


@dataclass(frozen=True)
class WorkerSpec:
    """Which worker a client needs: what it runs, with which imports, on which GPU."""

    handler: str  # "file.py:function" or "module:function"
    sys_path: tuple[str, ...]
    packages: tuple[str, ...] = ()  # the code under test, fingerprinted
    device: str = ""  # e.g. CUDA_VISIBLE_DEVICES; part of the group
    preload: str = ""  # "file.py" of a package to register before the handler (benchmarks)
    slot: str = ""  # workers of different slots coexist on one GPU (the gate's two sides)
    label: str = ""  # shown in logs: commit, side

    @property
    def group(self) -> str:
        text = json.dumps([sys.executable, self.device, self.handler, self.slot])
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def code(self) -> str:
        return package_fingerprint(self.packages, self.sys_path)

    def name(self) -> str:
        path_digest = hashlib.sha256("\0".join(self.sys_path).encode()).hexdigest()[:6]
        return f"{self.group}-{self.code()[:10]}{path_digest}"


# --------------------------------------------------------------------------- client


class WorkerClient:
    """Requests to the worker for ``spec``, starting (or replacing) it as needed."""

    def __init__(self, spec: WorkerSpec, idle_s: float | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.idle_s = idle_s if idle_s is not None else float(
            os.environ.get("KPERF_WORKER_IDLE_S", DEFAULT_IDLE_S))
        self.env = env
        self.dir = worker_dir()
        self.dir_id = self._dir_id()
        self.started_fresh = False

    def _dir_id(self) -> tuple[int, int]:
        st = checked(self.dir)
        return st.st_dev, st.st_ino

    # paths of the current worker
    def _paths(self) -> dict[str, Path]:
        if self._dir_id() != self.dir_id:
            raise UntrustedWorker(f"{self.dir}: the worker directory was replaced after it was "
                                  f"checked; refused")
        name = self.spec.name()
        paths = {k: self.dir / f"{name}.{k}" for k in ("sock", "key", "pid", "log", "lock")}
        if len(os.fsencode(paths["sock"])) > SOCKET_PATH_MAX:
            raise WorkerError(f"{paths['sock']}: longer than a Unix socket's path may be "
                              f"({SOCKET_PATH_MAX} bytes); set KPERF_WORKER_DIR to a shorter "
                              f"folder")
        return paths

    def request(self, message: dict[str, Any], timeout_s: float) -> Any:
        """The handler's result; raises RemoteSkip, RemoteError or WorkerError."""
        for attempt in range(2):
            paths = self._ensure()
            reply = self._exchange(paths, message, timeout_s)
            if reply.get("stale") and attempt == 0:
                _forget(paths)
                continue
            if reply.get("ok"):
                return reply["result"]
            if reply.get("stale"):
                raise WorkerError("measurement worker: code under test changed twice")
            if reply.get("skip"):
                raise RemoteSkip(reply["message"])
            raise RemoteError(reply)
        raise AssertionError("unreachable")

    def _exchange(self, paths: dict[str, Path], message: dict[str, Any],
                  timeout_s: float) -> dict[str, Any]:
        try:
            conn = connect(paths["sock"], paths["key"])
        except (OSError, EOFError) as err:
            raise WorkerError(f"measurement worker {paths['sock']}: cannot connect ({err})"
                              f"{_log_tail(paths)}") from err
        try:
            conn.send(message)
            if not conn.poll(timeout_s):
                pid = _kill(paths)
                raise WorkerError(f"measurement worker (pid {pid}) gave no answer within "
                                  f"{timeout_s:.0f} s: killed{_log_tail(paths)}")
            return conn.recv()
        except (EOFError, OSError) as err:
            _wait_exit(paths)
            _forget(paths)
            raise WorkerError(f"measurement worker died while answering "
                              f"({type(err).__name__}){_log_tail(paths)}") from err
        finally:
            conn.close()

    def _ensure(self) -> dict[str, Path]:
        """The paths of a live worker for this spec, started if there is none."""
        paths = self._paths()
        with _locked(paths["lock"]):
            if self._alive(paths):
                return paths
            _forget(paths)
            self.retire_group(except_name=paths["sock"].stem)
            self._start(paths)
            return paths

    def _alive(self, paths: dict[str, Path]) -> bool:
        if not paths["sock"].exists() or not paths["pid"].exists():
            return False
        try:
            pid = read_pid(paths["pid"])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, PermissionError):
            return False
        try:
            reply = self._exchange(paths, {"op": "hello"}, HELLO_TIMEOUT_S)
        except UntrustedWorker:
            raise
        except WorkerError:
            return False
        return bool(reply.get("ok"))

    def _start(self, paths: dict[str, Path]) -> None:
        write_key(paths["key"])
        env = dict(self.env if self.env is not None else os.environ)
        cmd = [sys.executable, "-m", "kperf.core.workerproc", "--socket", str(paths["sock"]),
               "--key-file", str(paths["key"]), "--idle", str(self.idle_s),
               "--spec", json.dumps(self.spec.__dict__),
               *(["--owner", env[OWNER_ENV]] if env.get(OWNER_ENV) else [])]
        # the worker imports kperf from here, then takes the client's sys.path and gives
        # the processes it starts the client's PYTHONPATH (never the working tree's code)
        if "PYTHONPATH" in env:
            env[CLIENT_PYTHONPATH] = env["PYTHONPATH"]
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        with paths["log"].open("a") as log:
            log.write(f"--- start {time.strftime('%H:%M:%S')} {self.spec.label}\n")
            log.flush()
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    cwd=str(self.dir))
        write_pid(paths["pid"], proc.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(paths):
            if proc.poll() is not None:
                raise WorkerError(f"measurement worker exited at start (code "
                                  f"{proc.returncode}){_log_tail(paths)}")
            if time.monotonic() > deadline:
                _kill(paths)
                raise WorkerError(f"measurement worker did not start within "
                                  f"{START_TIMEOUT_S:.0f} s{_log_tail(paths)}")
            time.sleep(0.02)
        self.started_fresh = True

    def retire_group(self, except_name: str = "") -> int:
        """Tell every other worker of this group (same Python and GPU) to exit."""
        return retire(self.dir, f"{self.spec.group}-", except_name)

    def shutdown(self) -> None:
        """Stop this spec's worker (any code), if one runs."""
        retire(self.dir, f"{self.spec.group}-", "")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held: this worker's lock file (one client starts or replaces it at a time)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _listening(paths: dict[str, Path]) -> bool:
    """Whether the worker accepts connections: its socket file appears when the socket
    is bound, a moment before it listens, and a connection in between is refused."""
    if not paths["sock"].exists():
        return False
    try:
        connect(paths["sock"], paths["key"]).close()
    except (OSError, EOFError):
        return False
    return True


def _wait_exit(paths: dict[str, Path], limit_s: float = 2.0) -> None:
    """Let a dying worker finish writing its log, so its last words reach the error."""
    with contextlib.suppress(ValueError, OSError):
        pid = read_pid(paths["pid"])
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and not _gone(pid):
            time.sleep(0.05)


def _kill(paths: dict[str, Path]) -> int | None:
    pid = None
    with contextlib.suppress(ValueError, OSError):
        pid = read_pid(paths["pid"])
        os.killpg(pid, signal.SIGKILL)
    _forget(paths)
    return pid


def _forget(paths: dict[str, Path]) -> None:
    for kind in ("sock", "pid", "key"):
        with contextlib.suppress(FileNotFoundError):
            paths[kind].unlink()


def _log_tail(paths: dict[str, Path]) -> str:
    try:
        with paths["log"].open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    tail = tail[tail.rfind("--- start"):].strip()  # this worker's part only
    return f"\n--- end of the worker's log ({paths['log']}):\n{tail}" if tail else ""


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited; reaps it when it is this process's child (a worker the
    gate started would otherwise linger as a zombie that still answers ``kill 0``)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def retire(directory: Path, prefix: str = "", except_name: str = "") -> int:
    """Stop the workers whose name starts with ``prefix``; returns how many were stopped."""
    stopped = 0
    for sock in sorted(directory.glob(f"{prefix}*.sock")):
        if sock.stem == except_name:
            continue
        key, pid_file = sock.with_suffix(".key"), sock.with_suffix(".pid")
        try:
            conn = connect(sock, key)
            conn.send({"op": "shutdown"})
            conn.poll(10)
            conn.close()
        except (OSError, EOFError, UntrustedWorker):
            pass
        with contextlib.suppress(ValueError, OSError):
            pid = read_pid(pid_file)  # never a reused pid
            for _ in range(50):  # give it a moment to free the GPU, then insist
                if _gone(pid):
                    break
                time.sleep(0.1)
            else:
                os.killpg(pid, signal.SIGKILL)
        for path in (sock, key, pid_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        stopped += 1
    return stopped


# The run a worker belongs to (``pid:start``, kperf/core/pidfile.py ``process_identity``):
# a worker whose run is gone, even killed with no chance to stop it, exits and removes its
# files (kperf/core/workerproc.py)
OWNER_ENV = "KPERF_WORKER_OWNER"


@contextlib.contextmanager
def run_workers(prefix: str = "kperf-run-", logs: Path | None = None) -> Iterator[Path]:
    """A worker folder of one run's own (an unpredictable name, mode 0700, in
    ``KPERF_WORKER_DIR``, the runtime folder or the temporary folder), which this process
    and its children use while the run lasts (``KPERF_WORKER_DIR``, and this process as the
    workers' owner). The first worker makes it (``worker_dir``), so a run that starts none
    leaves nothing, even killed. When the run ends every worker started there is stopped,
    their logs go to ``logs`` (if given) and the folder is removed; a run killed outright
    leaves its workers to notice their owner is gone and clean up after themselves."""
    from kperf.core.pidfile import process_identity

    explicit = os.environ.get("KPERF_WORKER_DIR")
    base = private_dir(Path(explicit), create=True) if explicit else runtime_dir()
    if base is not None and len(os.fsencode(base)) + len(prefix) + 9 + SOCKET_NAME_CHARS \
            > SOCKET_PATH_MAX:
        base = None  # too deep for its workers' sockets: the temporary folder instead
    folder = Path(os.path.realpath(base or tempfile.gettempdir())) / (
        prefix + secrets.token_hex(4))
    saved = {k: os.environ.get(k) for k in ("KPERF_WORKER_DIR", OWNER_ENV)}
    os.environ["KPERF_WORKER_DIR"] = str(folder)
    os.environ[OWNER_ENV] = process_identity(os.getpid())
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        retire(folder)
        _empty(folder, logs)


def _empty(folder: Path, logs: Path | None) -> None:
    """Remove a finished run's worker folder, its logs moved to ``logs`` first."""
    if not folder.is_dir():
        return  # no worker started
    for path in folder.iterdir():
        if path.suffix == ".log" and logs is not None and path.stat().st_size:
            logs.mkdir(parents=True, exist_ok=True)
            path.replace(logs / path.name)
        else:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def register_package(preload: str | Path) -> None:
    """Make the package at ``preload`` (its ``__init__.py``) importable by its own name only,
    as asv does for the benchmark suite, without putting its parent on ``sys.path``."""
    init = Path(preload)
    spec = importlib.util.spec_from_file_location(
        init.parent.name, init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[init.parent.name] = module
    spec.loader.exec_module(module)
