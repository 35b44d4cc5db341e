"""The measurement worker (harness/worker.py): failures stay with their request, a crashed,
hung or stale worker is replaced by a fresh process, groups are retired, the folder is
private. Real worker processes, handlers in tests/_worker_handlers.py.

The workers are children of this test process. The client's ``subprocess.Popen`` is
wrapped so that a reaper thread waits for each worker it starts and keeps its exit code.
The client reaps a worker itself where it waits for one to end (a crash, a retire); the
exit code is then the client's, and the test sees None: the worker ended, how is unknown.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import worker, workerauth
from harness.pidfile import write_pid
from harness.worker import (
    RemoteError,
    RemoteSkip,
    WorkerClient,
    WorkerError,
    WorkerSpec,
    retire,
    worker_dir,
)

REPO = Path(__file__).resolve().parent.parent
HANDLER = f"{Path(__file__).with_name('_worker_handlers.py')}:handle"
SLOW_LISTEN = str(Path(__file__).with_name("_slow_listen_worker.py"))
FORGED = str(Path(__file__).with_name("_forged_worker.py"))
NOBODY = 65534  # another user, where this test runs as root
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
        self.script = ""  # instead of ``-m harness.workerproc``, when set
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def write_code(self, package: str, version: int, note: str = "") -> None:
        (self.code / package).mkdir(parents=True, exist_ok=True)
        (self.code / package / "__init__.py").write_text(f"VERSION = {version}  {note}\n")

    def spec(self, package: str = "toycode", slot: str = "") -> WorkerSpec:
        return WorkerSpec(handler=HANDLER, sys_path=(str(self.code), str(REPO)),
                          package=package, device="kperf-test", slot=slot, label="test")

    def client(self, package: str = "toycode", slot: str = "", idle_s: float = 30.0):
        return WorkerClient(self.spec(package, slot), idle_s=idle_s)

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        """The client's ``subprocess.Popen``: starts the worker, and keeps it for the reaper."""
        if self.script:
            assert cmd[1:3] == ["-m", "harness.workerproc"], cmd
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


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch):
    w = Workers()
    monkeypatch.setenv("KPERF_WORKER_DIR", str(w.dir))
    monkeypatch.setattr(worker, "subprocess", SimpleNamespace(
        Popen=w.popen, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT))
    yield w
    w.close()


def test_a_request_that_raises_is_its_error_and_the_worker_exits(workers: Workers) -> None:
    client = workers.client()
    first = workers.pid(client)
    with pytest.raises(RemoteError) as err:
        client.request({"op": "raise"}, TIMEOUT_S)
    assert err.value.error_type == "RuntimeError"
    text = str(err.value)
    assert text.startswith("RuntimeError: compile error in kernel X")
    assert "--- in the measurement worker:\nTraceback" in text
    assert "_worker_handlers.py" in text and 'raise RuntimeError("compile error' in text
    # after an error that is not a skip or a wrong result, the worker exits (by itself)
    assert workers.ended(first) == 0
    assert workers.pid(client) != first


def test_a_skip_and_a_wrong_result_leave_the_worker_serving(workers: Workers) -> None:
    client = workers.client()
    first = workers.pid(client)
    with pytest.raises(RemoteSkip, match="has no case 'x' at this commit"):
        client.request({"op": "skip"}, TIMEOUT_S)
    assert issubclass(RemoteSkip, NotImplementedError)  # asv records a skip
    with pytest.raises(RemoteError) as err:
        client.request({"op": "wrong"}, TIMEOUT_S)
    assert err.value.error_type == "WrongResult" and "3 of 100 values outside" in str(err.value)
    assert workers.pid(client) == first and workers.running(first)


def test_a_crash_names_the_log_tail_and_a_fresh_worker_follows(workers: Workers) -> None:
    client = workers.client()
    first = workers.pid(client)
    with pytest.raises(WorkerError) as err:
        client.request({"op": "crash"}, TIMEOUT_S)
    text = str(err.value)
    assert "measurement worker died while answering" in text
    assert "end of the worker's log" in text and "last words before the crash" in text
    assert workers.ended(first) in (3, None)  # the handler's os._exit(3), reaped by the client
    second = workers.pid(client)
    assert second != first and workers.running(second)


def test_a_hang_is_killed_at_the_timeout_and_a_fresh_worker_follows(workers: Workers) -> None:
    client = workers.client()
    first = workers.pid(client)
    start = time.monotonic()
    with pytest.raises(WorkerError) as err:
        client.request({"op": "hang"}, timeout_s=1.0)
    assert time.monotonic() - start < 5.0
    text = str(err.value)
    assert f"measurement worker (pid {first}) gave no answer within 1 s: killed" in text
    assert "hanging in kernel Y" in text  # the log's tail
    assert workers.ended(first) == -signal.SIGKILL, "the hung worker must be killed"
    second = workers.pid(client)
    assert second != first and workers.running(second)


def test_changed_code_is_answered_stale_and_the_worker_replaced(workers: Workers) -> None:
    client = workers.client()
    first = workers.pid(client)
    (sock,) = workers.dir.glob("*.sock")
    workers.write_code("toycode", 2, "# asv installed another commit")
    conn = Client(str(sock), family="AF_UNIX", authkey=sock.with_suffix(".key").read_bytes())
    conn.send({"op": "pid"})
    assert conn.poll(TIMEOUT_S)
    reply = conn.recv()
    conn.close()
    assert reply == {"ok": False, "stale": True, "message": "code under test changed"}
    assert workers.ended(first) == 0, "a stale worker exits"
    answer = client.request({"op": "pid"}, TIMEOUT_S)
    assert answer["pid"] != first and answer["version"] == 2  # imports the new code
    assert len(list(workers.dir.glob("*.sock"))) == 1


def test_code_changed_during_a_request_is_retried_on_a_fresh_worker(
        workers: Workers, monkeypatch: pytest.MonkeyPatch) -> None:
    """asv installs another commit between the client's liveness check and its request:
    the worker answers stale, and the client asks a fresh worker once."""
    client = workers.client()
    first = workers.pid(client)
    ensure = client._ensure
    changes: list[int] = []

    def ensure_then_change() -> dict[str, Path]:
        paths = ensure()
        if not changes:
            changes.append(1)
            workers.write_code("toycode", 2, "# changed under the live worker")
        return paths

    monkeypatch.setattr(client, "_ensure", ensure_then_change)
    answer = client.request({"op": "pid"}, TIMEOUT_S)
    assert changes == [1]
    assert answer["pid"] != first and answer["version"] == 2
    assert workers.ended(first) in (0, None)  # the client may reap it while it retries


def test_one_worker_per_group_and_retire_and_shutdown_stop_them(workers: Workers) -> None:
    workers.write_code("othercode", 1)
    first = workers.pid(workers.client("toycode"))
    other = workers.client("othercode")  # other code, same Python, GPU and handler
    second = workers.pid(other)
    # a new worker of a group retires the group's others: told to exit, they do (and the
    # client reaps them); one that did not would be killed, and read -SIGKILL here
    assert workers.ended(first) in (0, None)
    head = workers.client("toycode", slot="head")  # another slot: another group
    third = workers.pid(head)
    assert workers.running(second) and workers.running(third)

    other.shutdown()
    assert workers.ended(second) in (0, None) and workers.running(third)
    assert [p.stem for p in workers.dir.glob("*.sock")] == [head.spec.name()]
    assert retire(workers.dir) == 1
    assert workers.ended(third) in (0, None) and list(workers.dir.glob("*.sock")) == []
    assert list(workers.dir.glob("*.key")) == [] and list(workers.dir.glob("*.pid")) == []


def test_an_idle_worker_exits_by_itself(workers: Workers) -> None:
    client = workers.client(idle_s=0.3)
    first = workers.pid(client)
    assert workers.ended(first) == 0
    assert list(workers.dir.glob("*.sock")) == []
    assert workers.pid(client) != first


def test_the_worker_directory_is_private(workers: Workers) -> None:
    client = workers.client()
    assert stat.S_IMODE(workers.dir.stat().st_mode) == 0o700
    workers.pid(client)
    (key,) = workers.dir.glob("*.key")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    for mode in (0o755, 0o750, 0o701):
        workers.dir.chmod(mode)
        with pytest.raises(WorkerError, match="must be owned by this user, mode 0700"):
            worker_dir()
        with pytest.raises(WorkerError, match="mode 0700"):
            workers.client()
    workers.dir.chmod(0o700)
    if os.geteuid() == 0:  # only root can give the folder to someone else
        os.chown(workers.dir, 65534, -1)
        with pytest.raises(WorkerError, match="owned by this user"):
            worker_dir()
        os.chown(workers.dir, 0, -1)
    assert worker_dir() == workers.dir


def test_a_worker_slow_to_listen_is_waited_for(workers: Workers) -> None:
    """Its socket file exists before it accepts connections: the client waits until it
    does, instead of failing the case with "connection refused" (seen under load)."""
    workers.script = SLOW_LISTEN
    client = workers.client()
    first = workers.pid(client)
    assert workers.pid(client) == first and workers.running(first)


def test_a_client_with_the_wrong_key_does_not_stop_the_worker(workers: Workers) -> None:
    """Anyone who can reach the socket but lacks the key is turned away, and the worker
    goes on serving those who have it (multiprocessing's AuthenticationError)."""
    from multiprocessing import AuthenticationError

    client = workers.client()
    first = workers.pid(client)
    (sock,) = workers.dir.glob("*.sock")
    with pytest.raises(AuthenticationError):
        Client(str(sock), family="AF_UNIX", authkey=b"not the key")
    assert workers.pid(client) == first and workers.running(first)


@pytest.mark.parametrize("client_path", ["/opt/stack/site-packages", None])
def test_the_workers_children_get_the_clients_pythonpath(workers: Workers, monkeypatch,
                                                         client_path: str | None) -> None:
    """The worker imports harness through a PYTHONPATH naming the working tree; the
    processes it starts (a compiler's pool) get the client's instead, so they can never
    import the working tree's ``kernels`` in place of the commit's."""
    if client_path is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", client_path)
    seen = workers.client().request({"op": "environ", "keys": ["PYTHONPATH",
                                                               "KPERF_CLIENT_PYTHONPATH"]},
                                    TIMEOUT_S)
    assert seen == {"PYTHONPATH": client_path, "KPERF_CLIENT_PYTHONPATH": None}


# --------------------------------------------------------------------------- impostors


def _forge(sock: Path, key: Path, marker: Path, uid: int | None = None) -> subprocess.Popen:
    """A forged worker (tests/_forged_worker.py) listening on ``sock`` with the key in
    ``key``; as user ``uid`` if given. Its replies create ``marker`` when unpickled."""
    if not key.exists():
        key.write_bytes(b"the forger's own key")
    proc = subprocess.Popen([sys.executable, FORGED, str(sock), str(key), str(marker),
                             *([str(uid)] if uid is not None else [])],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "listening"
    return proc


def _impostor(workers: Workers, trick: str, marker: Path,
              monkeypatch: pytest.MonkeyPatch) -> tuple[subprocess.Popen, WorkerClient | None]:
    """A forged worker where the client for ``workers.spec()`` will look, by ``trick``;
    the client, where the trick needs one made before it is played."""
    name = workers.spec().name()
    evil = workers.root / "evil"
    evil.mkdir(mode=0o700)
    if trick == "symlinked folder":
        forged = _forge(evil / f"{name}.sock", evil / f"{name}.key", marker)
        write_pid(evil / f"{name}.pid", forged.pid)
        (workers.root / "link").symlink_to(evil)
        monkeypatch.setenv("KPERF_WORKER_DIR", str(workers.root / "link"))
        return forged, None
    client = workers.client()  # the genuine folder made and checked
    if trick in ("link swapped in after the check", "folder swapped in after the check"):
        forged = _forge(evil / f"{name}.sock", evil / f"{name}.key", marker)
        write_pid(evil / f"{name}.pid", forged.pid)
        workers.dir.rename(workers.root / "moved")
        if trick.startswith("link"):
            workers.dir.symlink_to(evil)
        else:
            evil.rename(workers.dir)
    elif trick == "symlinked key":
        forged = _forge(workers.dir / f"{name}.sock", evil / "key", marker)
        (workers.dir / f"{name}.key").symlink_to(evil / "key")
    else:  # "another user's process", holding the key
        key = workers.dir / f"{name}.key"
        key.write_bytes(b"a key the forger learnt")
        key.chmod(0o600)
        if os.geteuid() == 0:  # a real other user: it listens as nobody, in its own folder
            own = Path(tempfile.mkdtemp(prefix="kw-nobody-"))  # where nobody can reach
            os.chown(own, NOBODY, NOBODY)
            forged = _forge(own / "sock", key, marker, uid=NOBODY)
            (own / "sock").rename(workers.dir / f"{name}.sock")
            own.rmdir()
        else:  # the kernel's answer to SO_PEERCRED, as it would be for another user
            forged = _forge(workers.dir / f"{name}.sock", key, marker)
            monkeypatch.setattr(workerauth, "peer_credentials",
                                lambda conn: (forged.pid, os.geteuid() + 1, os.getegid()),
                                raising=False)
    write_pid(workers.dir / f"{name}.pid", forged.pid)
    return forged, client


@pytest.mark.parametrize("trick", ["symlinked folder", "link swapped in after the check",
                                   "folder swapped in after the check", "symlinked key",
                                   "another user's process"])
def test_a_forged_worker_is_never_believed(workers: Workers, monkeypatch: pytest.MonkeyPatch,
                                           trick: str) -> None:
    """A worker that is not this user's own, reached through a link in place of the folder
    (from the start, or swapped in after the folder was checked), another folder renamed
    in after the check, a link in place of the key, or another user's process at the
    socket: the client refuses before it unpickles
    a byte of the reply (the forged reply's payload would create the marker), and the case
    fails with an error that says why."""
    marker = workers.root / "marker"
    forged, client = _impostor(workers, trick, marker, monkeypatch)
    error = ""
    try:
        try:
            (client or workers.client()).request({"op": "pid"}, TIMEOUT_S)
        except WorkerError as err:
            error = str(err)
        assert not marker.exists(), "a forged worker's pickled reply was loaded"
        why = {"symlinked folder": "is a symbolic link",
               "link swapped in after the check": "is a symbolic link",
               "folder swapped in after the check": "was replaced after it was checked",
               "symlinked key": "key is a symbolic link",
               "another user's process": "answered by a process of uid"}[trick]
        assert why in error and "refused" in error, error or "the forged reply was accepted"
    finally:
        forged.kill()
        forged.wait()
        if (workers.root / "moved").exists():  # the genuine folder back, for the cleanup
            if workers.dir.is_symlink():
                workers.dir.unlink()
            else:
                shutil.rmtree(workers.dir)
            (workers.root / "moved").rename(workers.dir)


def test_the_default_worker_folder_cannot_be_taken_first_by_another_user(
        workers: Workers, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``KPERF_WORKER_DIR`` the folder is ``$XDG_RUNTIME_DIR/kperf-workers`` when
    that runtime folder is this user's alone, else a fresh folder with an unpredictable
    name, exported to this process's children. The old predictable
    ``/tmp/kperf-workers-<uid>``, made first by another user (a real one where this runs as
    root, else a folder open to others under a uid of its own), fails nothing."""
    uid = 2**31 - 17  # no real user's: the folder below is this test's alone
    squatted = Path(f"/tmp/kperf-workers-{uid}")
    squatted.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.chown(squatted, NOBODY, NOBODY)
    monkeypatch.setattr(os, "getuid", lambda: uid)
    monkeypatch.delenv("KPERF_WORKER_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(workers.root))
    made: list[Path] = []
    try:
        client = workers.client()
        made.append(client.dir)
        assert workers.pid(client) > 0  # served: a timed case would be measured
        assert client.dir.parent == workers.root and client.dir.name != squatted.name
        assert os.environ["KPERF_WORKER_DIR"] == str(client.dir) and worker_dir() == client.dir
        st = client.dir.lstat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        runtime = workers.root / "run"
        runtime.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.delenv("KPERF_WORKER_DIR")
        assert worker_dir() == runtime / "kperf-workers"  # the runtime folder first
        runtime.chmod(0o755)  # but not one open to others
        fallback = worker_dir()
        made.append(fallback)
        assert fallback.parent == workers.root and fallback != client.dir
    finally:
        for folder in made:
            retire(folder)
        squatted.rmdir()
