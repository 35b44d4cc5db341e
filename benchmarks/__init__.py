"""asv suites. asv reads this folder from the working tree for every commit it measures.

The measurement core (``harness/``, at the repository root) is loaded from the working
tree by path, without putting the repository root on ``sys.path``: the code under test
(``kernels``) must come from the package asv installed for the commit, never from the
working tree. Nothing here may initialise the GPU: asv may import the suite in a fork
server before any benchmark runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path


def _load_harness() -> None:
    if "harness" in sys.modules:
        return
    root = Path(__file__).resolve().parent.parent / "harness"
    spec = importlib.util.spec_from_file_location(
        "harness", root / "__init__.py", submodule_search_locations=[str(root)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["harness"] = module
    spec.loader.exec_module(module)


_load_harness()

# Modules the fork server imports once, so each benchmark process does not pay for them
# (tools/history/asvrun.py sets the list: torch, Triton and TileLang). TileLang's import initialises
# CUDA, which forked children cannot use; they never do: timed cases run in a measurement
# worker (harness/worker.py), a fresh process.
# Only a speed-up: a module this environment lacks is left to the benchmark that needs it,
# which then fails (or skips) with its own error instead of breaking discovery.
# asv's discovery (``benchmark.py discover``, a process of its own at every run) reads
# only the suites' names and parameters: it does not pay for them.
if sys.argv[1:2] != ["discover"]:
    for _module in filter(None, os.environ.get("KPERF_PREIMPORT", "").split(",")):
        with contextlib.suppress(ImportError):
            importlib.import_module(_module)
