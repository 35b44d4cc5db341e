"""A forged measurement worker, for tests/test_worker_impostors.py: what an attacker would
put where a victim's client looks for its worker.

    python tests/_forged_worker.py SOCKET KEY_FILE MARKER [UID]

It listens on SOCKET with the key in KEY_FILE (its own), as user UID if given (it starts as
root and drops to UID before it listens, so the socket's peer credentials are UID's), and
answers every request with a reply that holds a pickled payload: loading the reply creates
MARKER, as a real attacker's payload would run any code as the victim.
"""

from __future__ import annotations

import hmac  # noqa: F401  (imported here: once it runs as UID, /root's modules are out of reach)
import os
import pickle
import sys
from multiprocessing.connection import Listener
from pathlib import Path


class Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (self.marker, "w"))  # unpickling calls open(marker, "w")


def main(sock: str, key_file: str, marker: str, uid: str = "") -> None:
    key = Path(key_file).read_bytes()
    if uid:
        os.setgid(int(uid))
        os.setuid(int(uid))
    listener = Listener(sock, family="AF_UNIX", authkey=key)
    print("listening", flush=True)
    reply = pickle.dumps({"ok": True, "pid": os.getpid(), "result": Payload(marker)})
    while True:
        try:
            conn = listener.accept()
        except Exception:  # a client that refused the handshake
            continue
        try:
            conn.recv_bytes()
            conn.send_bytes(reply)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
