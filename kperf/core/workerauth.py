"""The measurement worker's trust: its folder, its key and the process at its socket.

A worker's folder holds its socket, key, pid file and log: it must be this user's, mode
0700, and never reached through a symbolic link; a key is created and read without
following links; and nothing a socket sends is unpickled before its other end has shown
the key (multiprocessing's HMAC challenge) and is this user's process (SO_PEERCRED). A
predictable folder in /tmp, a linked or swapped folder and a forged reply carrying a
pickled payload were each shown to work against an earlier version (issue 27,
docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import socket
import stat
import struct
import tempfile
from multiprocessing.connection import Client, Connection
from pathlib import Path


class WorkerError(RuntimeError):
    """The worker crashed, hung, or could not be started: the case fails with this."""


class UntrustedWorker(WorkerError):
    """A worker folder, key or process that is not this user's own: refused, and nothing
    it sent is ever unpickled."""


def worker_dir() -> Path:
    """Where this user's workers keep sockets, keys, pid files and logs: a folder of this
    user's (mode 0700, not a symbolic link), by its resolved path.

    ``KPERF_WORKER_DIR`` if set; else ``$XDG_RUNTIME_DIR/kperf-workers`` when that runtime
    folder is this user's alone; else a fresh folder with an unpredictable name, exported
    as ``KPERF_WORKER_DIR`` so that this process's children share it. (A predictable name
    in /tmp could be made first by another user: issue 27.)"""
    explicit = os.environ.get("KPERF_WORKER_DIR")
    if explicit:
        return private_dir(Path(explicit), create=True)
    runtime = runtime_dir()
    if runtime is not None:
        return private_dir(runtime / "kperf-workers", create=True)
    path = private_dir(Path(tempfile.mkdtemp(prefix="kperf-workers-")))
    os.environ["KPERF_WORKER_DIR"] = str(path)
    return path


def runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR`` if it is set and a folder of this user's alone."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    try:
        return private_dir(Path(runtime)) if runtime else None
    except WorkerError:
        return None


def private_dir(path: Path, create: bool = False) -> Path:
    """``path`` with its parents resolved, once checked to be a folder of this user's, mode
    0700, and not a symbolic link (``lstat``: a link is never followed)."""
    path = Path(os.path.realpath(Path(path).absolute().parent)) / Path(path).name
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    checked(path)
    return path


def checked(path: Path) -> os.stat_result:
    """The ``lstat`` of a worker folder, or the reason it is refused."""
    try:
        st = os.lstat(path)
    except OSError as err:
        raise WorkerError(f"{path}: worker directory cannot be read ({err})") from err
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedWorker(f"{path}: worker directory is a symbolic link; refused (it must "
                              f"be a folder of this user's, mode 0700)")
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise UntrustedWorker(f"{path}: worker directory must be owned by this user, mode 0700;"
                              f" refused")
    return st


def write_key(path: Path) -> None:
    """A new secret for a worker, in a file only this user can read; never through a link
    or over a file that is already there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError as err:
        raise UntrustedWorker(f"{path}: something is already where a new worker's key goes "
                              f"(a file or a link); refused: a key is only ever written new"
                              ) from err
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_bytes(32))


def read_key(path: Path) -> bytes:
    """A worker's secret, from a file of this user's that only this user can read."""
    try:
        # O_NONBLOCK: a FIFO in the key's place would hold the open until someone writes
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UntrustedWorker(f"{path}: the worker's key is a symbolic link; refused") from err
        raise
    st = os.fstat(fd)  # before fdopen, which refuses a folder with an error of its own
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise UntrustedWorker(f"{path}: the worker's key must be a file of this user's, "
                              f"mode 0600; refused")
    with os.fdopen(fd, "rb") as f:
        return f.read()


def peer_credentials(conn: Connection) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


def check_peer(conn: Connection, where: Path | str) -> None:
    """Refuse a connection whose other end is not this user's process."""
    pid, uid, _ = peer_credentials(conn)
    if uid != os.geteuid():
        conn.close()
        raise UntrustedWorker(f"{where}: answered by a process of uid {uid} (pid {pid}), not "
                              f"this user's; refused before reading its reply")


def connect(sock: Path, key: Path) -> Connection:
    """A connection to the worker at ``sock`` whose sender is proven before anything it
    sends is unpickled: it knows the key (multiprocessing's HMAC challenge, both ways, in
    plain bytes) and it is this user's process (SO_PEERCRED)."""
    conn = Client(str(sock), family="AF_UNIX", authkey=read_key(key))
    check_peer(conn, sock)
    return conn
