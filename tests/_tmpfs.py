"""A real full disk for the fault tests: a tiny tmpfs mounted in a private user and mount
namespace (``unshare -rm``, no root needed; docs/reliability.md, "Full disk")."""

from __future__ import annotations

import subprocess

import pytest

UNSHARE = ["unshare", "-rm", "sh", "-c"]


def unshare_works() -> bool:
    try:
        return subprocess.run([*UNSHARE, "mount -t tmpfs -o size=64k tmpfs /mnt && true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_tmpfs = pytest.mark.skipif(
    not unshare_works(), reason="needs `unshare -rm` and a tmpfs mount (user namespaces); "
    "the test with a simulated ENOSPC covers the logic")
