"""The measurement worker (kperf/core/worker.py): failures stay with their request, a crashed,
hung or stale worker is replaced by a fresh process, groups are retired, the folder is
private. Real worker processes (tests/_workers.py), handlers in
tests/_worker_handlers.py; tests/test_worker_impostors.py plays forged workers.

The workers are children of this test process. The client's ``subprocess.Popen`` is
wrapped so that a reaper thread waits for each worker it starts and keeps its exit code.
The client reaps a worker itself where it waits for one to end (a crash, a retire); the
exit code is then the client's, and the test sees None: the worker ended, how is unknown.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from multiprocessing.connection import Client
from pathlib import Path

import pytest

from kperf.core.worker import (
    RemoteError,
    RemoteSkip,
    WorkerError,
    retire,
    worker_dir,
)
from tests._workers import TIMEOUT_S, Workers

SLOW_LISTEN = str(Path(__file__).with_name("_slow_listen_worker.py"))


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
