"""A session for tests/test_session_cleanup.py to stop: its one test waits SLEEPER_S."""

from __future__ import annotations

import os
import time


def test_waits() -> None:
    time.sleep(float(os.environ.get("SLEEPER_S", "0")))
