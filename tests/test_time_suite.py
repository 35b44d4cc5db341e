"""The timed benchmark path as asv drives it, on CPU, and the L2 flush it asks the GPU for.

``bench_gemm.GemmTime``'s ``setup`` asks a real measurement worker (kperf/core/worker.py, a
separate process running ``kperf.suites.case.handle``) to build and check the case,
``track_time`` asks it to measure and writes the per-sample record: the same calls asv
makes, with ``KPERF_DEVICE=cpu`` (the Triton kernel under its interpreter, timed on the
host) instead of a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kperf.core import record
from kperf.core.device import TorchDevice
from tests._bench import BENCH_CASE as CASE
from tests._bench import BENCH_PLAN as PLAN

REPO = Path(__file__).resolve().parent.parent


def test_time_suite_measures_in_a_worker_and_writes_a_record(cpu_bench: Path) -> None:
    from benchmarks import bench_gemm

    suite = bench_gemm.GemmTime()
    start = time.time()
    suite.setup(*CASE)  # asv: setup, then the timed method, in one benchmark process
    result = suite.track_time(*CASE)

    assert set(result) == {"samples", "number"}  # what asv parses as a timing
    samples = result["samples"]
    assert len(samples) == PLAN["trials"] and all(0 < s < 10 for s in samples)
    assert result["number"] >= PLAN["min_reps"]

    files = sorted(cpu_bench.rglob("*.json"))
    assert len(files) == 1, files
    folder = cpu_bench / "cpu-test" / "01234567-existing-py" / "bench_gemm.GemmTime.track_time"
    assert files[0].parent == folder
    rec = json.loads(files[0].read_text())
    assert rec["schema"] == record.RECORD_SCHEMA == "kperf-record-2"
    assert rec["benchmark"] == "bench_gemm.GemmTime.track_time" and rec["kind"] == "time"
    assert rec["params"] == {"case": "test-ragged", "dtype": "fp16", "backend": "triton"}
    assert rec["machine"] == "cpu-test" and rec["env_name"] == "existing-py"
    assert rec["commit"] == os.environ["ASV_COMMIT"]
    assert rec["recorded_at"] >= start
    # measured in the worker, not in this (the benchmark) process
    assert isinstance(rec["pid"], int) and rec["pid"] != os.getpid()
    assert files[0].name.endswith(f".{os.getpid()}.json")  # written by the benchmark process
    assert rec["gpu"] == "cpu" and rec["target"] == "sm_90a"
    m = rec["measurement"]
    assert m["samples"] == samples and m["number"] == result["number"]
    assert m["mode"] == "events" and m["telemetry_backend"] == "none"
    assert m["warmup_trials"] == 1 and len(m["trial_spans_s"]) == PLAN["trials"]
    assert rec["config"]["BM"] > 0  # the tile configuration the Triton backend chose
    assert rec["first_call_s"] > 0
    assert 0 <= rec["max_abs_err"] < 2e-2  # checked against the reference (fp16 tolerance)
    flops = 2.0 * 96 * 80 * 72
    assert rec["tflops"] == pytest.approx(flops / statistics.median(samples) / 1e12)
    assert rec["energy_per_call_j"] is None
    assert rec["idle_before_s"] is None  # the worker's first measurement
    assert len(m["warmup_trace"]) == m["warmup_trials"]
    second = bench_gemm.GemmTime()
    second.setup(CASE[0], "fp32", CASE[2])
    second.track_time(CASE[0], "fp32", CASE[2])
    later = [json.loads(f.read_text()) for f in cpu_bench.rglob("*.json") if f != files[0]]
    assert len(later) == 1 and 0 <= later[0]["idle_before_s"] < 60
    suite.worker.shutdown()


def test_time_suite_names_only_cases_the_op_has(cpu_bench: Path) -> None:
    from benchmarks import bench_gemm
    from kperf.ops.op import Unsupported

    with pytest.raises(Unsupported, match="no case 'no-such-case'"):
        bench_gemm.GemmTime().setup("no-such-case", "fp16", "triton")
    assert not cpu_bench.exists()


# ------------------------------------------------------------------ the L2 flush


class _NoCuda:
    """Enough of torch.cuda for ``TorchDevice`` on a machine without a GPU: the flush
    buffer is made on the meta device, which has a size but holds no memory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import torch

        real_empty = torch.empty

        def empty(*size, device=None, **kw):
            if str(device).startswith("cuda"):
                self.devices.append(str(device))
                device = "meta"
            return real_empty(*size, device=device, **kw)

        self.devices: list[str] = []
        props = SimpleNamespace(name="Fake H200", clock_rate=1_980_000, major=9, minor=0)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
        monkeypatch.setattr(torch, "empty", empty)


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_timed_path_flushes_twice_the_last_level_cache(monkeypatch: pytest.MonkeyPatch,
                                                       target: str) -> None:
    """The device the timed path (``CaseRunner``, as the worker's ``handle`` uses it) opens
    on a GPU holds a flush buffer of at least twice the target's last-level cache."""
    import kperf.ops.targets
    from kperf.suites.case import CaseRunner

    tgt = kperf.ops.targets.get_target(target)
    monkeypatch.setenv("KPERF_DEVICE", "gpu")
    monkeypatch.setattr(kperf.ops.targets, "current_device_target", lambda: tgt)
    cuda = _NoCuda(monkeypatch)

    device = CaseRunner(device_index=0).device()
    assert isinstance(device, TorchDevice) and set(cuda.devices) == {"cuda:0"}
    flush = device._flush
    assert flush.numel() * flush.element_size() >= 2 * tgt.l2_bytes
    device.flush_l2()  # what timing.measure calls before each timed call: writes all of it


def test_a_flush_writes_its_whole_buffer_or_reads_it_and_leaves_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan key ``flush_by_reading``: the read covers every element and writes none."""
    import torch

    _NoCuda(monkeypatch)
    device = TorchDevice(flush_bytes=4096)
    device._flush = torch.ones(1024, dtype=torch.int32)
    device._sink = torch.zeros((), dtype=torch.int32)
    device.flush_l2(by_reading=True)
    assert int(device._sink) == 1024 and bool((device._flush == 1).all())
    device.flush_l2()
    assert not device._flush.any()


def test_a_case_prepared_again_says_so_instead_of_repeating_its_compile(cpu_bench) -> None:
    """The energy suite prepares a case the time suite already prepared in the same worker:
    the log must not count its compile twice (the one-op-change check reads those lines)."""
    from kperf.suites import case as _case

    runner = _case.CaseRunner()
    spec = {"op": "gemm", "case": CASE[0], "dtype": "fp32", "backend": "torch"}
    first = runner.prepare(spec)
    note = runner.compiles[_case.case_key(spec)]
    assert note != "prepared before"
    assert runner.prepare(spec) is first
    assert runner.compiles[_case.case_key(spec)] == "prepared before"


def test_warm_imports_what_cases_need_without_touching_a_gpu() -> None:
    """A gate worker started ahead of its turn imports while another process measures: it
    must not open a device (here there is none, so opening one would fail)."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from kperf.suites import case as _case\n"
        "specs = [{'op': 'gemm', 'case': 'square-4096', 'dtype': 'fp16', 'backend': b}"
        " for b in ('triton', 'tilelang', 'torch')]\n"
        "specs += [{'op': 'softmax', 'case': 'x', 'dtype': 'fp16', 'backend': 'triton'}]\n"
        "out = _case.handle({'op': 'warm', 'specs': specs})\n"
        "import torch\n"
        "print(json.dumps({**out, 'triton': 'triton' in sys.modules,"
        " 'tilelang': 'tilelang' in sys.modules,"
        " 'ops': sorted(m for m in sys.modules if m in ('kernels.gemm', 'kernels.softmax')),"
        " 'cuda': torch.cuda.is_initialized(), 'runner': _case._RUNNER is not None}))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KPERF_DEVICE", "TRITON_INTERPRET")}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["triton"] and out["tilelang"] and out["ops"] == ["kernels.gemm", "kernels.softmax"]
    assert not out["cuda"] and not out["runner"] and out["missing"] == []


# ------------------------------------------------------------------ inputs made once


def test_a_cases_backends_get_copies_of_inputs_made_once(cpu_bench) -> None:
    """The three backends of a case ask for the same seeded input sets: the worker makes
    them once and hands each a copy of its own (new storage, same values), so a kernel
    that writes to its inputs cannot change what the next backend is checked on."""
    import torch

    from kperf.suites import case as _case

    runner = _case.CaseRunner()
    made: list[int] = []
    make_inputs = _case.case_op("gemm").make_inputs

    def counted(case, dtype, device, seed):
        made.append(seed)
        return make_inputs(case, dtype, device, seed)

    spec = {"op": "gemm", "case": CASE[0], "dtype": "fp32"}
    op = _case.case_op("gemm")
    first = runner.input_sets.get(_Counting(op, counted), op.case(CASE[0]), "fp32", "cpu", 0)
    second = runner.input_sets.get(_Counting(op, counted), op.case(CASE[0]), "fp32", "cpu", 0)
    assert made == [0]
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    first[0].add_(1.0)  # a kernel writing its input
    third = runner.input_sets.get(_Counting(op, counted), op.case(CASE[0]), "fp32", "cpu", 0)
    assert torch.equal(third[0], second[0]) and made == [0]
    runner.input_sets.get(_Counting(op, counted), op.case(CASE[0]), "fp16", "cpu", 0)
    assert made == [0, 0]  # another dtype: other inputs

    # through prepare (torch's backend, as in the placement test): a case prepared again,
    # as another backend of it would be, makes no inputs
    key = _case.case_key({**spec, "backend": "torch"})
    first_prepared = runner.prepare({**spec, "backend": "torch"})
    made_once, copied = runner.input_sets.made, runner.input_sets.copied
    runner.prepared.clear()
    again = runner.prepare({**spec, "backend": "torch"})
    assert again is runner.prepared[key] and again is not first_prepared
    assert runner.input_sets.made == made_once
    assert runner.input_sets.copied == copied + len(again.inputs)
    assert all(torch.equal(a, b) and a.data_ptr() != b.data_ptr()
               for a, b in zip(first_prepared.inputs[0], again.inputs[0], strict=True))


def test_input_sets_past_their_limit_drop_the_oldest_but_keep_the_newest() -> None:
    import torch

    from kperf.suites.inputs import InputSets

    op = SimpleNamespace(name="toy", make_inputs=lambda case, dtype, device, seed: (
        torch.full((256,), float(seed)),))  # 1 KiB a set
    case = SimpleNamespace(name="c", dims={"N": 256})
    sets = InputSets(limit_bytes=2048)
    for seed in range(3):
        sets.get(op, case, "fp32", "cpu", seed)
    assert [key[-1] for key in sets.sets] == [1, 2]
    big = InputSets(limit_bytes=10)  # one set over the limit is still kept
    assert float(big.get(op, case, "fp32", "cpu", 5)[0][0]) == 5.0 and len(big.sets) == 1


class _Counting:
    def __init__(self, op, make_inputs) -> None:
        self.name, self.make_inputs = op.name, make_inputs


def test_a_measurement_awaiting_its_time_benchmark_needs_no_second_prepare(cpu_bench) -> None:
    """asv's energy benchmark of a case measures it; the time benchmark that comes next
    reads that measurement, so its prepare must not build, make inputs or check again
    (a large case's inputs may have been dropped meanwhile: seconds for nothing)."""
    from kperf.suites import case as _case

    _case._RUNNER = runner = _case.CaseRunner()
    try:
        spec = {"op": "gemm", "case": CASE[0], "dtype": "fp32", "backend": "torch"}
        first = _case.handle({"op": "prepare", "spec": spec, "consumer": "energy"})
        assert first["compile"] != "measured before"
        runner.measure_for(spec, PLAN, "energy")
        runner.prepared.clear()
        made = runner.input_sets.made
        ready = _case.handle({"op": "prepare", "spec": spec, "consumer": "time"})
        assert ready["compile"] == "measured before" and not runner.prepared
        assert runner.input_sets.made == made and ready["config"] == first["config"]
        assert runner.measure_for(spec, PLAN, "time")["fresh"] is False
        # the same consumer again (a second asv round) prepares and measures afresh
        again = _case.handle({"op": "prepare", "spec": spec, "consumer": "time"})
        assert again["compile"] != "measured before" and runner.prepared
    finally:
        _case._RUNNER = None


# ------------------------------------------------------------------ compiling a cold op ahead


def test_a_suite_names_the_cases_asv_was_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``selected`` matches asv's -b regexes as asv does (on name(param reprs)), so the
    worker compiles ahead only the kernels the run will measure."""
    from benchmarks import bench_gemm
    from kperf.suites.timed import BENCH_REGEX

    monkeypatch.delenv(BENCH_REGEX, raising=False)
    everything = bench_gemm.GemmTime().selected()
    params = bench_gemm.GemmTime.params
    assert len(everything) == len(params[0]) * len(params[1]) * len(params[2])
    monkeypatch.setenv(BENCH_REGEX, json.dumps(
        [r"GemmTime\.track_time\('square-8192', 'fp16'", "NoSuchSuite"]))
    chosen = bench_gemm.GemmTime().selected()
    assert chosen == [{"op": "gemm", "case": "square-8192", "dtype": "fp16", "backend": b}
                      for b in params[2]]
    assert bench_gemm.GemmEnergy().selected() == []  # the energy suite's name is its own
    monkeypatch.setenv(BENCH_REGEX, json.dumps(["bench_gemm"]))
    assert bench_gemm.GemmEnergy().selected() == everything


def test_a_cold_build_compiles_the_rest_of_its_op_ahead_once(
        cpu_bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that adds files to the compile cache means the op's source is new to it:
    the batch's other kernels of that op and backend are built in parallel processes
    (here torch's, whose build is cheap), once; a warm build (no new files) does not."""
    from kperf.suites import case as _case

    monkeypatch.setattr(_case, "COMPILE_AHEAD_BACKENDS", ("torch",))
    monkeypatch.setattr(_case, "COMPILE_AHEAD_PROCESSES", 2)
    files = iter(range(0, 1000, 7))
    monkeypatch.setattr(_case, "cache_files", lambda: next(files))  # every build adds 7
    batch = [{"op": "gemm", "case": c, "dtype": d, "backend": b}
             for c in ("test-ragged", "test-small-m") for d in ("fp16", "fp32")
             for b in ("torch", "triton")]
    batch.append({"op": "softmax", "case": "test-narrow", "dtype": "fp16",
                  "backend": "torch"})  # a gate side's batch spans ops
    runner = _case.CaseRunner()
    runner.prepare(batch[0], batch)
    note = runner.compiles[_case.case_key(batch[0])]
    assert note.startswith("compiled (7 new cache files")
    assert "; 4 more torch kernels compiled ahead in 2 processes in" in note
    assert "failed" not in note
    runner.prepare(batch[2], batch)  # the same op and backend: not again
    assert "ahead" not in runner.compiles[_case.case_key(batch[2])]
    monkeypatch.setattr(_case, "cache_files", lambda: 0)  # a warm cache: nothing ahead
    warm = _case.CaseRunner()
    warm.prepare(batch[0], batch)
    assert "ahead" not in warm.compiles[_case.case_key(batch[0])]


def test_build_only_compiles_without_inputs_or_a_launch(cpu_bench) -> None:
    from kperf.suites import case as _case

    out = _case.build_only({"op": "gemm", "case": "test-ragged", "dtype": "fp16",
                            "backend": "triton"})
    assert out["seconds"] >= 0 and out["config"]["BM"] > 0


# ------------------------------------------------------------------ the baseline's timing policy

BASELINE = (CASE[0], "fp32", "torch")


def test_an_unchanged_baseline_is_timed_once_per_machine_and_again_when_rerun(
        cpu_bench: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_gemm

    first = os.environ["ASV_COMMIT"]
    suite = bench_gemm.GemmTime()
    suite.setup(*BASELINE)
    suite.track_time(*BASELINE)
    (rec,) = [json.loads(p.read_text()) for p in cpu_bench.rglob("*.json")]
    assert rec["baseline_key"] == suite.baseline_key and len(rec["baseline_key"]) == 20

    monkeypatch.setenv("ASV_COMMIT", "fedcba9876543210fedcba9876543210fedcba98")
    with pytest.raises(NotImplementedError, match=f"unchanged since commit {first[:8]}"):
        bench_gemm.GemmTime().setup(*BASELINE)
    kernel = bench_gemm.GemmTime()
    kernel.setup(*CASE)  # the code under test is timed at every commit
    assert kernel.baseline_key is None

    monkeypatch.setenv("KPERF_BASELINE", "every")
    bench_gemm.GemmTime().setup(*BASELINE)
    monkeypatch.setenv("KPERF_BASELINE", "sometimes")
    with pytest.raises(ValueError, match="KPERF_BASELINE='sometimes'"):
        bench_gemm.GemmTime().setup(*BASELINE)

    monkeypatch.setenv("KPERF_BASELINE", "changed")
    monkeypatch.setenv("ASV_COMMIT", first)  # a rerun of the commit that timed it
    bench_gemm.GemmTime().setup(*BASELINE)


def test_a_baseline_with_another_key_is_timed(cpu_bench: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import bench_gemm
    from kperf.suites import timed as _suites

    suite = bench_gemm.GemmTime()
    suite.setup(*BASELINE)
    suite.track_time(*BASELINE)
    monkeypatch.setenv("ASV_COMMIT", "fedcba9876543210fedcba9876543210fedcba98")
    monkeypatch.setattr(_suites, "baseline_digest", lambda op, plan, root=None: "another-stack")
    again = bench_gemm.GemmTime()
    again.setup(*BASELINE)
    assert again.baseline_key == "another-stack"


def test_the_baseline_key_follows_its_code_not_the_kernels_under_test(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from kperf.suites.timed import baseline_digest

    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    root = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", root, ignore=shutil.ignore_patterns("__pycache__"))
    key = baseline_digest("gemm", {}, root)
    assert baseline_digest("gemm", {}, root) == key
    for name in ("triton_gemm.py", "tilelang_gemm.py"):
        (root / "gemm" / name).write_text((root / "gemm" / name).read_text() + "\n# edit\n")
    (root / "softmax" / "reference.py").write_text("# another op\n")
    assert baseline_digest("gemm", {}, root) == key
    for path in (root / "gemm" / "reference.py", root / "gemm" / "spec.py", root / "rownorm.py"):
        path.write_text(path.read_text() + "\n# edit\n")
        assert baseline_digest("gemm", {}, root) != key, path
        key = baseline_digest("gemm", {}, root)
    assert baseline_digest("gemm", {"trials": 4}, root) != key
    assert baseline_digest("gemm", {"placements": 16}, root) != key
