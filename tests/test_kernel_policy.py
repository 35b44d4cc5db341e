"""When a TileLang or Triton case is timed (KPERF_KERNELS, kperf/suites/digests.py): at every
commit by default; under "changed" only where what its timing depends on changed, as the
torch baseline is. The suites run as asv drives them, on CPU (``cpu_bench``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests._bench import BENCH_CASE as CASE

REPO = Path(__file__).resolve().parent.parent
NEXT_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def _time(suite_cls: type, case: tuple[str, str, str]) -> object:
    suite = suite_cls()
    suite.setup(*case)
    suite.track_time(*case)
    return suite


def test_every_commit_times_every_kernel_by_default(cpu_bench: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_gemm

    suite = _time(bench_gemm.GemmTime, CASE)
    assert suite.kernel_key is None  # not even hashed: the default costs nothing
    (rec,) = [json.loads(p.read_text()) for p in cpu_bench.rglob("*.json")]
    assert "kernel_key" not in rec
    monkeypatch.setenv("ASV_COMMIT", NEXT_COMMIT)
    bench_gemm.GemmTime().setup(*CASE)  # no skip


def test_under_changed_an_unchanged_kernel_is_timed_once_per_machine(
        cpu_bench: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_gemm

    monkeypatch.setenv("KPERF_KERNELS", "changed")
    first = os.environ["ASV_COMMIT"]
    suite = _time(bench_gemm.GemmTime, CASE)
    (rec,) = [json.loads(p.read_text()) for p in cpu_bench.rglob("*.json")]
    assert rec["kernel_key"] == suite.kernel_key and len(suite.kernel_key) == 20
    assert "baseline_key" not in rec

    monkeypatch.setenv("ASV_COMMIT", NEXT_COMMIT)
    for suite_cls in (bench_gemm.GemmTime, bench_gemm.GemmEnergy):
        with pytest.raises(NotImplementedError,
                           match=f"gemm/{CASE[0]}/fp16/triton: the kernel is unchanged "
                                 f"since commit {first[:8]}.*KPERF_KERNELS=every"):
            suite_cls().setup(*CASE)
    other_dtype = (CASE[0], "fp32", "triton")  # never timed here: timed
    assert bench_gemm.GemmTime().setup(*other_dtype) is None

    monkeypatch.setenv("ASV_COMMIT", first)  # a rerun replaces a measurement
    bench_gemm.GemmTime().setup(*CASE)
    monkeypatch.setenv("KPERF_KERNELS", "sometimes")
    with pytest.raises(ValueError, match="KPERF_KERNELS='sometimes'"):
        bench_gemm.GemmTime().setup(*CASE)


def test_under_changed_a_kernel_with_another_key_is_timed_again(
        cpu_bench: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_gemm
    from kperf.suites import timed as _suites

    monkeypatch.setenv("KPERF_KERNELS", "changed")
    _time(bench_gemm.GemmTime, CASE)
    monkeypatch.setenv("ASV_COMMIT", NEXT_COMMIT)
    monkeypatch.setattr(_suites, "kernel_digest",
                        lambda op, backend, plan, root=None: "new-triton")
    again = bench_gemm.GemmTime()
    again.setup(*CASE)
    assert again.kernel_key == "new-triton"


def test_the_kernel_key_follows_its_backends_code_and_the_plan_not_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of gemm's TileLang kernel times TileLang's gemm cases again, not Triton's;
    the op's spec and the shared code time both again; another op's edit neither."""
    from kperf.suites.digests import _kernel_digest, kernel_digest

    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    root = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", root, ignore=shutil.ignore_patterns("__pycache__"))
    plan = {"stop_rel_ci": 0.001}

    def keys(p: dict = plan) -> tuple[str, str]:
        _kernel_digest.cache_clear()  # the files change under the test, not under a run
        return (kernel_digest("gemm", "triton", p, root),
                kernel_digest("gemm", "tilelang", p, root))

    triton, tilelang = keys()
    assert keys() == (triton, tilelang) and triton != tilelang
    (root / "softmax" / "reference.py").write_text("# another op\n")
    assert keys() == (triton, tilelang)
    (root / "gemm" / "tilelang_gemm.py").write_text(
        (root / "gemm" / "tilelang_gemm.py").read_text() + "\n# edit\n")
    assert keys()[0] == triton and keys()[1] != tilelang
    seen = {triton, *keys()}
    for path in (root / "gemm" / "spec.py", root / "rownorm.py"):
        path.write_text(path.read_text() + "\n# edit\n")
        assert not set(keys()) & seen, path
        seen |= set(keys())
    assert not set(keys({"stop_rel_ci": 0.002})) & seen  # another class precision
    assert not set(keys({"stop_rel_ci": 0.001, "trials": 4})) & seen
