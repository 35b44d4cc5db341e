"""kperf/core/workerproc.py as a script, with a worker slow to listen: its socket file exists (the
socket is bound) half a second before it accepts connections, a loaded machine's gap
between ``bind`` and ``listen`` stretched. For tests/test_worker.py."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kperf.core import workerproc

_listen = socket.socket.listen


def _slow_listen(self: socket.socket, *args: int) -> None:
    time.sleep(0.5)
    _listen(self, *args)


socket.socket.listen = _slow_listen
workerproc.main(sys.argv[1:])
