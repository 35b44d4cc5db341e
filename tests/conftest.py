"""Shared fixtures. Caches go to a per-session temp dir so tests never touch ~/.triton."""

from __future__ import annotations

import os
import sys
import tempfile
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
