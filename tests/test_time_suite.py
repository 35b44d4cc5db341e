"""The timed benchmark path as asv drives it, on CPU, and the L2 flush it asks the GPU for.

``bench_gemm.GemmTime``'s ``setup`` asks a real measurement worker (harness/worker.py, a
separate process running ``benchmarks._case.handle``) to build and check the case,
``track_time`` asks it to measure and writes the per-sample record: the same calls asv
makes, with ``KPERF_DEVICE=cpu`` (the Triton kernel under its interpreter, timed on the
host) instead of a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import record
from harness.device import TorchDevice
from harness.worker import retire

REPO = Path(__file__).resolve().parent.parent

PLAN = {"trials": 3, "min_trial_s": 0.01, "min_reps": 2, "warmup_min_s": 0,
        "warmup_max_s": 0, "energy_s": 0}
CASE = ("test-ragged", "fp16", "triton")  # gemm's small CPU case: M 96, N 80, K 72


@pytest.fixture
def cpu_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    # a short folder: a worker's socket path must fit AF_UNIX's 108 bytes
    workers = Path(tempfile.mkdtemp(prefix="kperf-ts-"))
    env = {"KPERF_DEVICE": "cpu", "TRITON_INTERPRET": "1", "KPERF_TELEMETRY": "none",
           "KPERF_WORKER_DIR": str(workers), "KPERF_WORKER_IDLE_S": "60",
           "KPERF_RECORD_DIR": str(tmp_path / "records"), "KPERF_MACHINE": "cpu-test",
           "ASV_COMMIT": "0123456789abcdef0123456789abcdef01234567",
           "ASV_ENV_NAME": "existing-py", "KPERF_PLAN": json.dumps(PLAN)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("KPERF_TARGET", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(key, raising=False)
    yield tmp_path / "records"
    retire(workers)
    for path in workers.iterdir():
        path.unlink()
    workers.rmdir()


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
    suite.worker.shutdown()


def test_time_suite_names_only_cases_the_op_has(cpu_bench: Path) -> None:
    from benchmarks import bench_gemm
    from kernels.op import Unsupported

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
    import kernels.targets
    from benchmarks._case import CaseRunner

    tgt = kernels.targets.get_target(target)
    monkeypatch.setenv("KPERF_DEVICE", "gpu")
    monkeypatch.setattr(kernels.targets, "current_device_target", lambda: tgt)
    cuda = _NoCuda(monkeypatch)

    device = CaseRunner(device_index=0).device()
    assert isinstance(device, TorchDevice) and cuda.devices == ["cuda:0"]
    flush = device._flush
    assert flush.numel() * flush.element_size() >= 2 * tgt.l2_bytes
    device.flush_l2()  # what timing.measure calls before each timed call: writes all of it


# ------------------------------------------------------------------ input placement


def test_placements_time_the_same_kernel_on_copies_of_its_inputs(cpu_bench: Path) -> None:
    """Plan key ``placements``: every call runs on a copy of the inputs at a new address,
    ``placements`` copies of each input set, gives the same output as the original, and
    the copies are let go when the measurement ends. (torch's backend: this process may
    have imported Triton before ``TRITON_INTERPRET`` was set.)"""
    import torch

    from benchmarks._case import CaseRunner

    runner = CaseRunner()
    spec = {"op": "gemm", "case": CASE[0], "dtype": "fp32", "backend": "torch"}
    prepared = runner.prepare(spec)
    placed = runner.placed(prepared, 3)
    assert len(placed.calls) == 3 * len(prepared.inputs)
    original = {t.data_ptr() for x in prepared.inputs for t in x}
    copies = [t for x in runner._placed if isinstance(x, tuple) for t in x]
    assert len(copies) == 3 * sum(len(x) for x in prepared.inputs)
    assert original.isdisjoint(t.data_ptr() for t in copies)
    torch.testing.assert_close(placed.calls[len(prepared.inputs)](), prepared.calls[0]())
    runner.release_placed()
    assert runner._placed == []
    result = runner.measure(spec, {**PLAN, "placements": 2})
    assert len(result["samples"]) == PLAN["trials"] and runner._placed == []
    with pytest.raises(ValueError, match="placements"):
        runner.measure(spec, {**PLAN, "placements": -1})


def test_a_case_prepared_again_says_so_instead_of_repeating_its_compile(cpu_bench) -> None:
    """The energy suite prepares a case the time suite already prepared in the same worker:
    the log must not count its compile twice (the one-op-change check reads those lines)."""
    from benchmarks import _case

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
        "from benchmarks import _case\n"
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
