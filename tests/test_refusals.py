"""The refusals that guard the measurement worker and the gfx942 toolchain, each shown to
refuse: a client of another user at the worker's socket, a key file of the wrong owner,
mode or kind, a key written over something already there, a fetched toolchain wheel whose
sha256 differs from its pin, and a package member that leaves its folder."""

from __future__ import annotations

import hashlib
import io
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from multiprocessing.connection import Client, Listener
from pathlib import Path

import pytest

from kperf import toolchains as rocm_toolchain
from kperf.core import workerauth, workerproc
from kperf.core.workerauth import UntrustedWorker, read_key, write_key
from tests._workers import TIMEOUT_S, Workers

NOBODY = 65534


class _Payload:
    """Unpickling it creates ``marker``, as an attacker's payload would run any code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))


def _answered(conn, message: object) -> bool:
    """Whether the worker answers ``message`` on ``conn`` (it hangs up on a refused peer)."""
    try:
        conn.send(message)
        if not conn.poll(TIMEOUT_S):
            raise AssertionError("the worker neither answered nor hung up")
        conn.recv()
        return True
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return False
    finally:
        conn.close()


# A client that proves it holds the key but runs as another user: one plain request, then
# one whose unpickling would create MARKER. Imports before setuid (root's modules).
OTHER_USER_CLIENT = """
import hashlib, hmac, os, pickle, sys
from multiprocessing.connection import Client
sock, key, marker, uid = sys.argv[1:]
class Payload:
    def __reduce__(self):
        return (open, (marker, "w"))
os.setgid(int(uid))
os.setuid(int(uid))
for message in ({"op": "pid"}, Payload()):
    conn = Client(sock, family="AF_UNIX", authkey=bytes.fromhex(key))
    try:
        conn.send(message)
        conn.recv()
        print("answered", flush=True)
    except (EOFError, ConnectionResetError, BrokenPipeError):
        print("refused", flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a client as user nobody, which needs root; "
                    "test_the_worker_refuses_a_peer_the_kernel_names_another_user fakes it")
def test_the_worker_refuses_a_client_of_another_user(workers: Workers) -> None:
    """A real worker, and a client holding its key but running as nobody (the socket
    reached through a hard link, the folder being 0700): the worker hangs up before it
    reads a byte of the request, and still serves its own user."""
    client = workers.client()
    pid = workers.pid(client)
    name = client.spec.name()
    outside = Path(tempfile.mkdtemp(prefix="kw-peer-"))
    try:
        outside.chmod(0o755)
        os.link(client.dir / f"{name}.sock", outside / "s")
        (outside / "s").chmod(0o777)  # the socket itself: nobody may connect
        marker = outside / "marker"
        key = (client.dir / f"{name}.key").read_bytes().hex()
        out = subprocess.run([sys.executable, "-c", OTHER_USER_CLIENT, str(outside / "s"), key,
                              str(marker), str(NOBODY)], capture_output=True, text=True,
                             timeout=120)
        assert out.stdout.split() == ["refused", "refused"], out.stdout + out.stderr
        assert not marker.exists(), "the worker unpickled another user's request"
        assert workers.pid(client) == pid
    finally:
        shutil.rmtree(outside)


def test_the_worker_refuses_a_peer_the_kernel_names_another_user(
        workers: Workers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's own loop (kperf/core/workerproc.py) with SO_PEERCRED's answer made another
    user's, for a client that holds the key: no answer, nothing unpickled; with the real
    answer the same loop serves."""
    real = workerauth.peer_credentials
    monkeypatch.setattr(workerauth, "peer_credentials",
                        lambda conn: (real(conn)[0], os.geteuid() + 1, os.getegid()))
    key, address = secrets.token_bytes(32), str(workers.root / "s.sock")
    listener = Listener(address, family="AF_UNIX", authkey=key)
    spec = workers.spec()
    loop = threading.Thread(target=workerproc._serve_loop, daemon=True,
                            args=(listener, spec, spec.code(), workerproc._Idle(600.0)))
    loop.start()
    marker = workers.root / "marker"
    try:
        assert not _answered(Client(address, family="AF_UNIX", authkey=key), {"op": "hello"})
        assert not _answered(Client(address, family="AF_UNIX", authkey=key),
                             _Payload(str(marker)))
        assert not marker.exists(), "the worker unpickled another user's request"
        monkeypatch.setattr(workerauth, "peer_credentials", real)
        assert _answered(Client(address, family="AF_UNIX", authkey=key), {"op": "hello"})
    finally:
        monkeypatch.setattr(workerauth, "peer_credentials", real)
        with Client(address, family="AF_UNIX", authkey=key) as conn:
            conn.send({"op": "shutdown"})
            conn.recv()
        loop.join(TIMEOUT_S)
        listener.close()
    assert not loop.is_alive()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660], ids=oct)
def test_a_key_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    key = tmp_path / "w.key"
    write_key(key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(read_key(key)) == 32
    key.chmod(mode)
    with pytest.raises(UntrustedWorker, match=r"w\.key: the worker's key must be a file of "
                                              r"this user's, mode 0600; refused"):
        read_key(key)


def test_a_key_of_another_user_is_refused(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's key file, mode 0600 (nobody's where this runs as root; else this
    user's file read by a process whose uid is another)."""
    key = tmp_path / "w.key"
    write_key(key)
    if os.geteuid() == 0:
        os.chown(key, NOBODY, NOBODY)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: key.stat().st_uid + 1)
    with pytest.raises(UntrustedWorker, match="must be a file of this user's, mode 0600"):
        read_key(key)


def test_a_key_that_is_not_a_file_is_refused_without_blocking(tmp_path: Path) -> None:
    """A FIFO in the key's place: refused at once (an open for reading would otherwise wait
    for a writer); a folder likewise."""
    fifo, folder = tmp_path / "fifo.key", tmp_path / "dir.key"
    os.mkfifo(fifo, 0o600)
    folder.mkdir(mode=0o700)
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(read_key(fifo))
        except BaseException as err:
            outcome.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let the stuck open go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_key blocked on a FIFO in the key's place")
    assert isinstance(outcome[0], UntrustedWorker), outcome
    with pytest.raises(UntrustedWorker, match="must be a file of this user's"):
        read_key(folder)


@pytest.mark.parametrize("there", ["a file", "a dangling link", "a link to a file"])
def test_write_key_never_writes_over_what_is_there(tmp_path: Path, there: str) -> None:
    key, target = tmp_path / "w.key", tmp_path / "elsewhere"
    if there == "a file":
        key.write_bytes(b"planted")
    else:
        if there == "a link to a file":
            target.write_bytes(b"victim")
        key.symlink_to(target)
    before = {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
              for p in tmp_path.iterdir()}
    with pytest.raises(UntrustedWorker, match=r"w\.key: something is already where a new "
                                              r"worker's key goes .*refused"):
        write_key(key)
    after = {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
             for p in tmp_path.iterdir()}
    assert after == before, "write_key changed what was there"


# ------------------------------------------------------------------ the gfx942 toolchain


def _fake_wheel(folder: Path) -> Path:
    """A wheel pip accepts for the pinned platform, holding a librocmllvm.so and a member
    named to leave the folder it is unpacked into."""
    wheel = folder / "rocm_llvm_python-9.9.9-cp311-cp311-manylinux_2_27_x86_64.whl"
    info = "rocm_llvm_python-9.9.9.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(rocm_toolchain.WHEEL_MEMBER, b"\x7fELF the fake library")
        archive.writestr("../../escaped", b"outside")
        archive.writestr(f"{info}/METADATA",
                         "Metadata-Version: 2.1\nName: rocm-llvm-python\nVersion: 9.9.9\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: kperf-test\n"
                         "Root-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_27_x86_64\n")
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_a_fetched_wheel_whose_sha256_differs_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip fetches a local wheel (no index, no network); with a pin it does not match
    nothing is installed and nothing is left behind; with its own digest only the library
    is taken, never another member."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    source, root = tmp_path / "index", tmp_path / "root"
    source.mkdir()
    wheel = _fake_wheel(source)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    pin = {"requirement": str(wheel), "wheel": wheel.name, "llvm_version": "99.0.0git",
           "sha256": hashlib.sha256(b"the pinned wheel").hexdigest()}
    pins = {"rocm": {"rocm-9.9.9": pin}}
    with pytest.raises(rocm_toolchain.ToolchainError,
                       match=f"{wheel.name}: sha256 {digest} is not the pinned {pin['sha256']}"):
        rocm_toolchain.fetch_rocm("rocm-9.9.9", pins, root)
    assert sorted(root.iterdir()) == [], "a refused wheel left something behind"
    pin["sha256"] = digest
    folder = rocm_toolchain.fetch_rocm("rocm-9.9.9", pins, root)
    assert sorted(p.name for p in folder.iterdir()) == ["librocmllvm.so", "toolchain.json"]
    assert (folder / "librocmllvm.so").read_bytes() == b"\x7fELF the fake library"
    assert not any(p.name == "escaped" for p in tmp_path.rglob("*"))


def _deb(path: Path, members: dict[str, bytes]) -> Path:
    """A Debian package (an ar archive) whose data.tar.gz holds ``members``."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    blob = b"!<arch>\n"
    for name, content in (("debian-binary", b"2.0\n"), ("data.tar.gz", data.getvalue())):
        blob += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(content):<10}`\n".encode()
        blob += content + (b"\n" if len(content) % 2 else b"")
    path.write_bytes(blob)
    return path


@pytest.mark.parametrize("member", ["./usr/include/hip/../../../../escaped",
                                    "./usr/include/hip/sub/../../../../../escaped",
                                    "./usr/include/hip/{absolute}"])
def test_a_package_member_that_leaves_its_folder_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, member: str) -> None:
    """Each lands in this test's folder if unpacked (two levels up from the unpacked tree,
    or an absolute path there); none is written, nor anything else."""
    member = member.format(absolute=tmp_path / "escaped")
    debs = tmp_path / "debs"
    debs.mkdir()
    deb = _deb(debs / "fake.deb", {"./usr/include/hip/hip_runtime.h": b"// fine\n",
                                   member: b"outside"})
    pins = {"hip_tree": {"debs": [{"file": deb.name, "take": {"usr/include/hip": "usr/include"},
                                   "sha256": hashlib.sha256(deb.read_bytes()).hexdigest()}]}}
    monkeypatch.setattr(rocm_toolchain, "DEBS", debs)
    root = tmp_path / "deep" / "er" / "root"
    with pytest.raises(rocm_toolchain.ToolchainError,
                       match=re.escape(f"package member {member!r} leaves its folder")):
        rocm_toolchain.install_hip_tree(pins, root)
    assert not (root / "hip").exists() and sorted(root.iterdir()) == []
    assert not any(p.name == "escaped" for p in tmp_path.rglob("*"))
    pins["hip_tree"]["debs"][0]["sha256"] = "0" * 64  # the pin is checked before unpacking
    with pytest.raises(rocm_toolchain.ToolchainError, match="is not the pinned"):
        rocm_toolchain.install_hip_tree(pins, root)
