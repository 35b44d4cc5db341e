"""A fake libamd_smi.so for CPU-only tests of the AMD telemetry (see fake_amd_smi.c)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fake_amdsmi import build


def fake_rocm() -> Path:
    """The fake ROCm tree for this process, built once and reused while its inputs match.

    Built in a private directory and renamed into place, so parallel test runs never load
    a half-written library. Kept in the test session's cache folder (tests/conftest.py),
    removed with it; outside a test session, in the temporary folder.
    """
    digest = build.source_digest()
    cache = os.environ.get("KPERF_TEST_CACHE") or tempfile.gettempdir()
    target = Path(cache) / f"kperf-fake-rocm-{os.getuid()}-{digest}"
    if (target / "lib" / "libamd_smi.so").exists():
        return target
    scratch = Path(tempfile.mkdtemp(prefix="kperf-fake-rocm-build-", dir=cache))
    build.build(scratch)
    try:
        scratch.rename(target)
    except OSError:  # another process won the race; its tree is identical
        shutil.rmtree(scratch, ignore_errors=True)
    return target


class FakeState:
    """The state file the fake library re-reads on every call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def set(self, **values: int) -> None:
        """Append ``key value`` lines (``key__N`` writes the per-GPU key ``key.N``)."""
        with self.path.open("a") as f:
            for key, value in values.items():
                f.write(f"{key.replace('__', '.')} {int(value)}\n")

    def reset(self) -> None:
        self.path.write_text("")


def use_fake_amdsmi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeState:
    """Point amdsmi and pyrsmi at the fake library; the state file starts empty.

    Fails (rather than touching a real GPU) if amdsmi was already loaded from elsewhere.
    """
    rocm = fake_rocm()
    monkeypatch.delenv("ROCM_HOME", raising=False)
    for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                "KPERF_TELEMETRY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    state = FakeState(tmp_path / "smi-state")
    monkeypatch.setenv("FAKE_AMDSMI_STATE", str(state.path))
    import amdsmi

    loaded = amdsmi.amdsmi_wrapper._libraries["libamd_smi.so"]._name
    if Path(loaded).resolve() != (rocm / "lib" / "libamd_smi.so").resolve():
        pytest.fail(f"amdsmi was loaded from {loaded}, not the fake: run these tests alone")
    return state
