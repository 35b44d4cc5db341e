"""Shared fixtures. Caches go to a per-session temp dir so tests never touch ~/.triton."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_CACHE = Path(tempfile.mkdtemp(prefix="kperf-test-cache-"))
os.environ.setdefault("TRITON_CACHE_DIR", str(_CACHE / "triton"))
os.environ.setdefault("TILELANG_CACHE_DIR", str(_CACHE / "tilelang"))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# the gfx942 toolchain setup_env.sh unpacked here, also for the clones tests make (asv
# loads harness/ from a clone's working tree, which has no .cache of its own)
os.environ.setdefault("KPERF_ROCM_ROOT", str(REPO / ".cache" / "rocm-toolchain"))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA/ROCm GPU; run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def _is_kernels(module: str) -> bool:
    return module == "kernels" or module.startswith("kernels.")


@pytest.fixture
def triton_interpreter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Triton's interpreter in this process, for one test, and only for it.

    ``@triton.jit`` reads ``TRITON_INTERPRET`` when a module is imported, so a kernel module
    imported under it keeps interpreted kernels in ``sys.modules`` for the tests that
    follow (tests/test_compat_drift.py then failed with "'InterpretedFunction' object has
    no attribute 'cache_key'"). The test gets ``kernels`` imported afresh under the
    interpreter; afterwards the modules are those of before. Triton itself is imported
    first, with the interpreter off: its own ``@triton.jit`` helpers (``tl.cdiv``, ...)
    stay compilable for the tests that follow."""
    import triton.language  # noqa: F401

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    before = {name: module for name, module in sys.modules.items() if _is_kernels(name)}
    for name in before:
        del sys.modules[name]
    yield
    for name in [name for name in sys.modules if _is_kernels(name)]:
        del sys.modules[name]
    sys.modules.update(before)


@pytest.fixture(scope="module")
def th():
    """The gate's thresholds.json, as the gate reads it."""
    from tools.gate.config import Thresholds

    return Thresholds.load(REPO / "thresholds.json")


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch):
    """Real measurement workers in a private folder, started through a reaper
    (tests/_workers.py). tests/test_pidfile.py has a ``workers`` of its own."""
    from types import SimpleNamespace

    from harness import worker
    from tests._workers import Workers

    w = Workers()
    monkeypatch.setenv("KPERF_WORKER_DIR", str(w.dir))
    monkeypatch.setattr(worker, "subprocess", SimpleNamespace(
        Popen=w.popen, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT))
    yield w
    w.close()



@pytest.fixture
def cpu_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, triton_interpreter: None):
    """The timed suites as asv drives them, on CPU: a real measurement worker running the
    Triton kernels under the interpreter, records under the returned folder."""
    import json

    from harness.worker import retire
    from tests._bench import BENCH_PLAN

    # a short folder: a worker's socket path must fit AF_UNIX's 108 bytes
    workers = Path(tempfile.mkdtemp(prefix="kperf-ts-"))
    env = {"KPERF_DEVICE": "cpu", "KPERF_TELEMETRY": "none",
           "KPERF_WORKER_DIR": str(workers), "KPERF_WORKER_IDLE_S": "60",
           "KPERF_RECORD_DIR": str(tmp_path / "records"), "KPERF_MACHINE": "cpu-test",
           "ASV_COMMIT": "0123456789abcdef0123456789abcdef01234567",
           "ASV_ENV_NAME": "existing-py", "KPERF_PLAN": json.dumps(BENCH_PLAN)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("KPERF_TARGET", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES", "KPERF_BASELINE", "KPERF_KERNELS"):
        monkeypatch.delenv(key, raising=False)
    yield tmp_path / "records"
    retire(workers)
    for path in workers.iterdir():
        path.unlink()
    workers.rmdir()
