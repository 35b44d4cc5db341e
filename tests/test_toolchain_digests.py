"""The gfx942 toolchain's identity and where it goes (kperf/core/hip.py, kperf/suites/static.py):
what a toolchain's code depends on is in its identity, the run's identity is its own
toolchain folder's, a toolchain named for a case is the one that compiles it, and the static
figures' cache is keyed by the identity, not the name. (kperf/suites/digests.py's digests:
tests/test_compat_drift.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kperf.core import hip

ROCM = "rocm-9.9.0"  # a toolchain folder made here: its pieces are files of this test's


def _root(tmp_path: Path) -> Path:
    """A toolchain folder holding a HIP tree's stamp and a ROCm release's LLVM."""
    root = tmp_path / "toolchains"
    (root / "hip").mkdir(parents=True)
    (root / "hip" / "tree.json").write_text(json.dumps({"debs": ["hip-dev 6.4.3"]}))
    (root / ROCM).mkdir()
    (root / ROCM / "toolchain.json").write_text(json.dumps({"llvm_version": "20.0.0git"}))
    (root / ROCM / "librocmllvm.so").write_bytes(b"the release's LLVM")
    return root


def test_a_toolchains_identity_follows_its_llvm_its_headers_and_clang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same name with another LLVM library, other HIP headers or device libraries, or
    another clang-19 (every toolchain's front end) makes other code: another identity."""
    root = _root(tmp_path)
    monkeypatch.setenv(hip.ROOT_ENV, str(root))
    chain = hip.toolchain(ROCM)
    first = chain.identity()
    assert first == hip.toolchain(ROCM).identity()
    (root / ROCM / "librocmllvm.so").write_bytes(b"the release's LLVM, rebuilt")
    second = chain.identity()
    assert second != first
    (root / "hip" / "tree.json").write_text(json.dumps({"debs": ["hip-dev 6.4.4"]}))
    third = chain.identity()
    assert third != second
    monkeypatch.setattr(hip, "_tool_version", lambda path: "Debian clang version 19.1.99")
    assert chain.identity() != third


def test_the_runs_identity_is_its_own_toolchain_folders(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached per toolchain and folder: a folder without the HIP tree says so, whatever
    another folder's identity was."""
    monkeypatch.setenv(hip.TOOLCHAIN_ENV, "clang19")
    monkeypatch.setenv(hip.ROOT_ENV, str(_root(tmp_path)))
    hip._identity.cache_clear()
    found = hip.toolchain_identity()
    assert not found.startswith("absent")
    monkeypatch.setenv(hip.ROOT_ENV, str(tmp_path / "empty"))
    assert hip.toolchain_identity().startswith("absent: ")
    hip._identity.cache_clear()


def test_the_toolchain_a_case_names_compiles_it() -> None:
    """A gate case of one gfx942 toolchain (``Toolchain`` passed down by
    kperf/suites/static.py) is compiled by that toolchain, not the run's default."""
    source = ('#include <hip/hip_runtime.h>\n'
              'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1; }')
    for name in ("llvm19", "clang19"):
        out = hip.with_code_object({"source": source}, "amd", "gfx942", hip.toolchain(name))
        assert out["toolchain"] == name and out["hsaco"][:4] == b"\x7fELF"


def test_the_static_cache_is_keyed_by_the_toolchains_identity(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A toolchain reinstalled under its name (another LLVM) has another identity: its
    figures are computed again, not read from the cache of the old one."""
    from kperf.suites import static as _static

    key = {"op": "rmsnorm", "case": "llama3-8b.hidden", "target": "gfx942",
           "backend": "tilelang", "dtype": "fp16", "toolchain": "llvm19"}
    paths = []
    for identity in ("an LLVM", "another LLVM"):
        monkeypatch.setattr(hip.Toolchain, "identity", lambda self, i=identity: i)
        paths.append(_static._static_cache_path(key))
    assert paths[0] != paths[1]
