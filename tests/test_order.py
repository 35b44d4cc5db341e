"""Test files leave nothing behind for the next: a pair that once failed only in one order,
run in that order in one pytest process (issue 27; tools/test.sh runs the whole suite in
reverse order for the rest)."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO

# In-process Triton under its interpreter (the time suite's CPU tests), then an
# ahead-of-time compile of the same kernel module: "'InterpretedFunction' object has no
# attribute 'cache_key'" when the interpreted module (or Triton's own helpers) stayed in
# sys.modules.
INTERPRETED = "tests/test_time_suite.py"
COMPILED = "tests/test_compat_drift.py::test_supported_triton_still_compiles"


def test_triton_under_the_interpreter_leaves_compiled_kernels_compilable() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           INTERPRETED, COMPILED], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]
