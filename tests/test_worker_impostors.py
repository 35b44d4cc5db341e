"""Forged workers (tests/_forged_worker.py) where a client looks for its worker: a
symlinked or swapped folder, a forged key or socket, another user's process. None is ever
believed, nothing it sends is unpickled, and the default folder cannot be taken first by
another user."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kperf.core import workerauth
from kperf.core.pidfile import write_pid
from kperf.core.worker import (
    WorkerClient,
    WorkerError,
    retire,
    worker_dir,
)
from tests._workers import TIMEOUT_S, Workers

FORGED = str(Path(__file__).with_name("_forged_worker.py"))
NOBODY = 65534  # another user, where this test runs as root


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
    made: list[Path] = []
    squatted = None
    try:
        uid, squatted = _squat_old_worker_folder()
        monkeypatch.setattr(os, "getuid", lambda: uid)
        monkeypatch.delenv("KPERF_WORKER_DIR")
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        monkeypatch.setattr(tempfile, "tempdir", str(workers.root))
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
        if squatted is not None:
            squatted.rmdir()


def _squat_old_worker_folder() -> tuple[int, Path]:
    """(uid, folder): the old predictable ``/tmp/kperf-workers-<uid>`` of a uid that is no
    real user's and whose folder nobody made yet, made here first as another user would.
    A fixed uid collided with a second test run on the machine, and with a folder that a
    killed run left (issue 45)."""
    import pwd
    import random

    for _ in range(100):
        uid = random.randrange(2**30, 2**31 - 2)
        try:
            pwd.getpwuid(uid)
            continue  # a real user's
        except KeyError:
            pass
        squatted = Path(f"/tmp/kperf-workers-{uid}")
        try:
            squatted.mkdir(mode=0o755)
        except FileExistsError:
            continue
        squatted.chmod(0o755)  # whatever the umask: open to others
        if os.geteuid() == 0:
            os.chown(squatted, NOBODY, NOBODY)
        return uid, squatted
    raise AssertionError("no free uid for /tmp/kperf-workers-<uid> in 100 tries")
