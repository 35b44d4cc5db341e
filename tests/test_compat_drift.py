"""Version drift: a kernel that the stack's compiler cannot build is skipped with the reason.

The installed version is monkeypatched (``compat.installed_version``); the compile paths
are the real ones, so the checks sit where every kernel passes through them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kperf.ops import compat
from kperf.ops.op import Unsupported
from kperf.ops.registry import get_op
from kperf.ops.targets import get_target

REAL_VERSION = compat.installed_version


@pytest.fixture(autouse=True)
def _own_records(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The compile suites note what they timed beside the records: here, not in the repo."""
    monkeypatch.setenv("KPERF_RECORD_DIR", str(tmp_path / "records"))
    monkeypatch.setenv("KPERF_MACHINE", "drift-test")
    monkeypatch.delenv("KPERF_COMPILE", raising=False)


def _pretend(monkeypatch: pytest.MonkeyPatch, package: str, version: str) -> None:
    def fake(name: str) -> str:
        return version if name == package else REAL_VERSION(name)

    monkeypatch.setattr(compat, "installed_version", fake)


def _gemm_aot(backend: str, target: str) -> dict:
    op = get_op("gemm")
    case = op.case("square-4096")
    return op.backend(backend, case.name).aot(case, "fp16", get_target(target))


def test_old_triton_skips_the_aot_compile_naming_version_and_feature(monkeypatch) -> None:
    _pretend(monkeypatch, "triton", "3.2.0")
    with pytest.raises(Unsupported) as info:
        _gemm_aot("triton", "gfx942")
    message = str(info.value)
    assert "triton.aot" in message and "triton 3.2.0" in message and ">= 3.3" in message
    assert isinstance(info.value, NotImplementedError), "asv skips only on NotImplementedError"


def test_supported_triton_still_compiles(monkeypatch) -> None:
    _pretend(monkeypatch, "triton", "3.3.0")
    artifacts = _gemm_aot("triton", "gfx942")
    assert "amdgcn" in artifacts


def test_removed_feature_names_the_release_that_removed_it(monkeypatch) -> None:
    monkeypatch.setitem(compat.FEATURES, "triton.aot",
                        compat.Feature("triton", (3, 3), (3, 9), "test: gone in 3.9"))
    _pretend(monkeypatch, "triton", "3.9.1")
    with pytest.raises(Unsupported, match=r"removed in triton 3\.9, this stack has triton 3\.9\.1"):
        compat.require("triton.aot")


def test_api_error_on_untested_release_is_a_skip(monkeypatch) -> None:
    _pretend(monkeypatch, "tilelang", "0.1.99")
    with pytest.raises(Unsupported) as info, compat.api_guard("tilelang", "tilelang.lower"):
        raise AttributeError("module 'tilelang' has no attribute 'lower'")
    message = str(info.value)
    assert "tilelang 0.1.99" in message and "tilelang.lower" in message
    assert "AttributeError" in message and "0.1.15..0.1.15" in message


def test_api_error_on_tested_release_is_a_failure(monkeypatch) -> None:
    _pretend(monkeypatch, "tilelang", "0.1.15")
    with pytest.raises(AttributeError), compat.api_guard("tilelang", "tilelang.lower"):
        raise AttributeError("a real bug, not drift")


def test_tilelang_moved_api_on_new_release_skips_the_kernel(monkeypatch) -> None:
    """A TileLang whose lower() signature changed: the real gemm kernel is skipped."""
    tl = compat.tilelang()

    def lower_with_new_signature(func, *, target_spec):  # no 'target' keyword any more
        raise AssertionError("not reached")

    _pretend(monkeypatch, "tilelang", "0.2.0")
    monkeypatch.setattr(tl, "lower", lower_with_new_signature)
    with pytest.raises(Unsupported, match=r"tilelang\.lower failed on tilelang 0\.2\.0.*TypeError"):
        _gemm_aot("tilelang", "gfx942")


def test_static_figure_suite_records_a_skip(monkeypatch, tmp_path, repo) -> None:
    """Through the asv suite's own setup: NotImplementedError, which asv records as skipped."""
    monkeypatch.setenv("ASV_ENV_DIR", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "drifttest")
    _pretend(monkeypatch, "triton", "3.1.0")
    if "benchmarks" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "benchmarks", repo / "benchmarks" / "__init__.py",
            submodule_search_locations=[str(repo / "benchmarks")])
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = module
        spec.loader.exec_module(module)
    from benchmarks.bench_gemm import GemmRegisters

    with pytest.raises(NotImplementedError, match=r"triton 3\.1\.0"):
        GemmRegisters().setup("gfx942", "fp16", "triton")


def test_static_figure_cache_follows_the_op_source_not_the_commit(tmp_path):
    """Base and head of a PR share an op's compile unless the op (or shared code) changed."""
    from kperf.suites import digests as _digests

    root = tmp_path / "kernels"
    for rel, text in (("op.py", "shared"), ("gemm/spec.py", "g"), ("softmax/spec.py", "s")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def digest(op: str) -> str:
        return _digests.kernel_source_digest(op, root)

    gemm, softmax = digest("gemm"), digest("softmax")
    assert gemm != softmax and digest("gemm") == gemm
    (root / "softmax/spec.py").write_text("s, changed")
    assert digest("gemm") == gemm and digest("softmax") != softmax
    (root / "op.py").write_text("shared, changed")
    assert digest("gemm") != gemm


def _versions_but(monkeypatch, dist: str, version: str) -> None:
    """importlib.metadata as if ``dist`` were installed at ``version``."""
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: version if name == dist else real(name))


@pytest.mark.parametrize("compiler", ["triton", "tilelang", "apache-tvm-ffi"])
def test_the_kernel_source_digest_follows_the_compilers_versions(tmp_path, monkeypatch,
                                                                 compiler: str) -> None:
    """The same source compiled by another Triton or TileLang is other code: the static
    figures' cache and the cold-compile timing must not stand for it."""
    from kperf.suites import digests as _digests

    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    root = tmp_path / "kernels"
    (root / "gemm").mkdir(parents=True)
    (root / "gemm" / "spec.py").write_text("g")
    before = _digests.kernel_source_digest("gemm", root)
    _digests._kernel_digest.cache_clear()
    timed = _digests.kernel_digest("gemm", "triton", {}, root)  # --kernels changed's key
    _versions_but(monkeypatch, compiler, "99.0.0")
    assert _digests.kernel_source_digest("gemm", root) != before
    _digests._kernel_digest.cache_clear()
    assert _digests.kernel_digest("gemm", "triton", {}, root) != timed


def test_the_kernel_source_digest_follows_the_gfx942_toolchain_and_the_readers(
        tmp_path, monkeypatch) -> None:
    """It keys the static figures' cache: gfx942 TileLang code under another toolchain, or
    figures read by a changed reader (an occupancy rule fixed in kperf/core/codeobj.py), are
    computed again, never served from the cache of before."""
    from kperf.core import hip
    from kperf.suites import digests as _digests

    root = tmp_path / "kernels"
    (root / "gemm").mkdir(parents=True)
    (root / "gemm" / "spec.py").write_text("g")
    monkeypatch.setattr(hip, "toolchain_identity", lambda arch="gfx942": "clang19 as found")
    before = _digests.kernel_source_digest("gemm", root)
    monkeypatch.setattr(hip, "toolchain_identity", lambda arch="gfx942": "rocm-7.2.2")
    assert _digests.kernel_source_digest("gemm", root) != before
    monkeypatch.setattr(hip, "toolchain_identity", lambda arch="gfx942": "clang19 as found")
    assert _digests.kernel_source_digest("gemm", root) == before
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (
        b"# rule fixed" if self.name == "codeobj.py" else b""))
    assert _digests.kernel_source_digest("gemm", root) != before


def test_a_compile_digest_follows_its_own_compilers_only(tmp_path, monkeypatch) -> None:
    """Another TileLang re-times TileLang's compiles, not Triton's; another Triton the
    other way round."""
    from kperf.suites import digests as _digests

    root = tmp_path / "kernels"
    (root / "gemm").mkdir(parents=True)
    (root / "gemm" / "spec.py").write_text("g")

    def digests() -> dict[str, str]:
        return {b: _digests.compile_digest("gemm", b, "sm_90a", root)
                for b in ("tilelang", "triton")}

    before = digests()
    with monkeypatch.context() as patch:
        _versions_but(patch, "tilelang", "99.0.0")
        moved = digests()
    assert moved["triton"] == before["triton"] and moved["tilelang"] != before["tilelang"]
    _versions_but(monkeypatch, "triton", "99.0.0")
    moved = digests()
    assert moved["tilelang"] == before["tilelang"] and moved["triton"] != before["triton"]


@pytest.mark.parametrize("change", ["kperf/suites/case.py", "torch"])
def test_the_baseline_digest_follows_the_case_runner_and_torch(monkeypatch,
                                                               change: str) -> None:
    """kperf/suites/case.py builds, checks and times every case (the torch baseline's too);
    torch is the baseline's code: either changed, the baseline is timed again."""
    from kperf.suites import digests as _digests

    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    root = Path(__file__).resolve().parent.parent / "kernels"
    before = _digests.baseline_digest("gemm", {}, root)
    _digests._kernel_digest.cache_clear()
    timed = _digests.kernel_digest("gemm", "triton", {}, root)  # the kernels' too
    if change == "torch":
        _versions_but(monkeypatch, "torch", "99.0.0")
    else:
        real = Path.read_bytes
        monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (
            b"# edited" if self.name == "case.py" else b""))
    assert _digests.baseline_digest("gemm", {}, root) != before
    _digests._kernel_digest.cache_clear()
    assert _digests.kernel_digest("gemm", "triton", {}, root) != timed


def test_the_compile_suites_first_compile_serves_the_static_figures(monkeypatch, tmp_path):
    """asv runs <Op>Compile before the figure suites; its first timed compile keeps its
    figures where they look, so they compile nothing (a cold run's 13 s an op on the H200
    machine). The figures are those the suites would have computed themselves."""
    from benchmarks.bench_gemm import GemmCompile, GemmRegisters
    from kperf.suites import static as _static

    monkeypatch.setenv("ASV_ENV_DIR", str(tmp_path / "kept"))
    suite = GemmCompile()
    suite.setup("sm_90a", "fp16", "triton")
    assert len(suite.track_compile("sm_90a", "fp16", "triton")["samples"]) == suite.repeat
    kept = GemmRegisters()
    compiles = []
    real = _static.keep_static_figures
    monkeypatch.setattr(_static, "keep_static_figures",
                        lambda *a, **k: compiles.append(a) or real(*a, **k))
    kept.setup("sm_90a", "fp16", "triton")
    assert compiles == [] and kept.value > 0
    monkeypatch.setenv("ASV_ENV_DIR", str(tmp_path / "fresh"))  # no kept figures
    fresh = GemmRegisters()
    fresh.setup("sm_90a", "fp16", "triton")
    assert len(compiles) == 1 and fresh.value == kept.value


def _count_compiles(monkeypatch, suite) -> list[str]:
    """Which kernels ``suite`` compiles from here on: its op's ("op") or another ("other")."""
    from kperf.ops.op import Backend

    calls: list[str] = []
    measured = suite.be

    def counted(be):
        def aot(case_def, dtype, target):
            calls.append("op" if be is measured else "other")
            return be.aot(case_def, dtype, target)
        return Backend(be.name, be.build, aot, be.module)

    real = type(suite)._compile_cold
    monkeypatch.setattr(type(suite), "_compile_cold",
                        lambda self, be, case_def, dtype: real(self, counted(be), case_def,
                                                               dtype))
    return calls


def test_the_compile_suite_primes_its_process_on_a_small_kernel(monkeypatch):
    """The untimed first compile of a process is a small kernel's (the primer), not the
    measured one's: every compile of the op's own kernel is a timed sample; a primer that
    fails leaves the op's kernel to prime, as before."""
    from benchmarks.bench_gemm import GemmCompile
    from kperf.ops.registry import get_op
    from kperf.ops.targets import get_target
    from kperf.suites import cpu as _cpu_suites

    suite = GemmCompile()  # what setup sets, without its primer (counted from here)
    op = get_op("gemm")
    suite.be, suite.case_def = op.backend("triton"), op.case("square-4096")
    suite.target, suite.compile_key = get_target("gfx942"), "primer-test"
    calls = _count_compiles(monkeypatch, suite)
    suite._prime("triton", "fp16")
    assert calls == ["other"]
    assert len(suite.track_compile("gfx942", "fp16", "triton")["samples"]) == 3
    assert calls == ["other", "op", "op", "op"]
    calls.clear()
    monkeypatch.setattr(_cpu_suites, "PRIMER", ("no-such-op", "x"))
    suite._prime("triton", "fp16")
    assert calls == ["op"]


def test_a_kernel_the_stack_cannot_build_is_a_skip_in_the_compile_suite(monkeypatch):
    from asv_runner.benchmarks.mark import SkipNotImplemented

    from benchmarks.bench_gemm import GemmCompile
    from kperf.ops.op import Backend, Unsupported

    suite = GemmCompile()
    suite.setup("gfx942", "fp16", "triton")

    def unsupported(*_):
        raise Unsupported("triton 9.9: no such API")

    suite.be = Backend("triton", suite.be.build, unsupported)
    with pytest.raises(SkipNotImplemented, match=r"triton 9\.9"):
        suite.track_compile("gfx942", "fp16", "triton")


def test_unchanged_kernels_compile_times_are_timed_once_per_machine(monkeypatch, tmp_path):
    """A commit whose op kernels and compilers are those of a commit this machine timed
    skips the op's compile suite, naming that commit; a rerun of that commit, another op,
    a changed kernel source and KPERF_COMPILE=every time it."""
    from benchmarks.bench_gemm import GemmCompile
    from benchmarks.bench_softmax import SoftmaxCompile
    from kperf.suites import cpu as _cpu_suites

    monkeypatch.setattr(GemmCompile, "repeat", 1)
    params = ("gfx942", "fp16", "triton")
    monkeypatch.setenv("ASV_COMMIT", "1111111111aaaaaaaaaa")
    first = GemmCompile()
    first.setup(*params)
    assert len(first.track_compile(*params)["samples"]) == 1
    (noted,) = (tmp_path / "records").parent.glob("compile-records/drift-test/*/*/*.json")
    assert '"compile_key"' in noted.read_text()

    monkeypatch.setenv("ASV_COMMIT", "2222222222bbbbbbbbbb")
    with pytest.raises(NotImplementedError, match="unchanged since commit 11111111"):
        GemmCompile().setup(*params)
    SoftmaxCompile().setup(*params)  # another op was never timed here
    GemmCompile().setup("sm_90a", "fp16", "triton")  # nor this target
    monkeypatch.setenv("KPERF_COMPILE", "every")
    GemmCompile().setup(*params)
    monkeypatch.setenv("KPERF_COMPILE", "sometimes")
    with pytest.raises(ValueError, match="KPERF_COMPILE='sometimes'"):
        GemmCompile().setup(*params)
    monkeypatch.setenv("KPERF_COMPILE", "changed")
    monkeypatch.setenv("ASV_COMMIT", "1111111111aaaaaaaaaa")  # a rerun of that commit
    GemmCompile().setup(*params)
    monkeypatch.setenv("ASV_COMMIT", "3333333333cccccccccc")  # the op's kernels changed
    monkeypatch.setattr(_cpu_suites, "compile_digest", lambda *kernel: "another source")
    GemmCompile().setup(*params)


def test_the_compile_digest_follows_the_kernel_its_compiler_and_the_timing_code(
        tmp_path, monkeypatch):
    """A kernel's compile is timed again where its own source, its compiler or the timing
    code changed; an edit of the op's other backend, or of another op, leaves it alone."""
    from kperf.core import hip
    from kperf.suites import digests as _digests

    root = tmp_path / "kernels"
    for rel in ("op.py", "gemm/spec.py", "gemm/tilelang_gemm.py", "gemm/triton_gemm.py",
                "softmax/spec.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    monkeypatch.setattr(hip, "toolchain_identity", lambda arch="gfx942": "clang19 as found")

    def digest(backend: str, target: str = "gfx942", op: str = "gemm") -> str:
        return _digests.compile_digest(op, backend, target, root)

    tilelang, triton, sm90 = digest("tilelang"), digest("triton"), digest("tilelang", "sm_90a")
    assert len({tilelang, triton, sm90}) == 3
    (root / "gemm/tilelang_gemm.py").write_text("block_K 32 -> 64")
    assert digest("triton") == triton  # the other backend's module: not its input
    assert digest("tilelang") != tilelang
    tilelang, softmax = digest("tilelang"), digest("tilelang", op="softmax")
    (root / "softmax/spec.py").write_text("changed")
    assert digest("tilelang") == tilelang and digest("tilelang", op="softmax") != softmax
    (root / "gemm/spec.py").write_text("a shared file of the op")
    assert digest("triton") != triton and digest("tilelang") != tilelang
    tilelang, triton, sm90 = digest("tilelang"), digest("triton"), digest("tilelang", "sm_90a")
    monkeypatch.setattr(hip, "toolchain_identity", lambda arch="gfx942": "rocm-7.2.2")
    assert digest("tilelang") != tilelang  # gfx942 TileLang: the toolchain compiles it
    assert digest("triton") == triton and digest("tilelang", "sm_90a") == sm90
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (
        b"# edited" if self.name == "cpu.py" else b""))
    assert digest("triton") != triton


def test_an_unreadable_timing_record_is_named_and_the_case_is_timed(monkeypatch, tmp_path,
                                                                     capsys):
    """The skip rule reads what this machine timed before: a record cut short (a killed
    writer, a full disk) is named on stderr and not used, so the case is timed, never
    skipped on the word of a file that cannot be read."""
    from benchmarks.bench_gemm import GemmCompile

    monkeypatch.setattr(GemmCompile, "repeat", 1)
    params = ("gfx942", "fp16", "triton")
    monkeypatch.setenv("ASV_COMMIT", "1111111111aaaaaaaaaa")
    first = GemmCompile()
    first.setup(*params)
    first.track_compile(*params)
    (noted,) = (tmp_path / "records").parent.glob("compile-records/drift-test/*/*/*.json")
    noted.write_text(noted.read_text()[:40])
    monkeypatch.setenv("ASV_COMMIT", "2222222222bbbbbbbbbb")
    GemmCompile().setup(*params)  # no skip
    assert f"record {noted} is unreadable" in capsys.readouterr().err
