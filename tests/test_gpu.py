"""Checks that need a real GPU (skipped on CPU with the reason; run on the H200)."""

from __future__ import annotations

import statistics

import pytest

from kperf import testing

pytestmark = pytest.mark.gpu


def _graph_replay_per_call(fn, calls: int = 200, replays: int = 20) -> float:
    """Reference: median per-call time of a CUDA/HIP graph of ``calls`` launches."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / calls)
    return statistics.median(times)


def test_two_microsecond_kernel_reads_its_graph_replay_time():
    import torch

    from kperf.core.device import TorchDevice
    from kperf.core.timing import Plan, measure

    x = torch.randn(1 << 20, device="cuda")  # 4 MB in, 4 MB out: ~2 us on an H200
    y = torch.empty_like(x)
    fn = lambda: torch.mul(x, 2.0, out=y)
    reference = _graph_replay_per_call(fn)
    m = measure([fn], TorchDevice(flush_bytes=1 << 27), Plan(flush_l2=False))
    assert m.mode == "graph"
    got = statistics.median(m.samples)
    print(f"core {got * 1e6:.2f} us, graph replay {reference * 1e6:.2f} us")
    assert got == pytest.approx(reference, rel=0.10)


def test_a_host_behind_the_gpu_gets_a_hold_and_the_kernels_own_time():
    """A ~50 us kernel behind an L2 flush: a host that queues it normally is far ahead of
    the GPU, and needs no hold; one that spins 300 us before each launch is not, and
    without a hold the events would read its latency too. A trial's worth of reps shows
    the host behind, and the loop puts a hold longer than the host's time a rep before
    each start event: the slow host's samples are then the kernel's (kperf/core/timing.py,
    ``rep_hold_s``)."""
    import time

    import torch

    from kperf.core.device import TorchDevice
    from kperf.core.timing import Plan, measure

    x = torch.randn(1 << 25, device="cuda")  # 128 MB in, 128 MB out: ~50 us on an H200
    y = torch.empty_like(x)
    fn = lambda: torch.mul(x, 2.0, out=y)

    def slow_host() -> None:
        until = time.perf_counter() + 300e-6
        while time.perf_counter() < until:
            pass
        fn()

    plan = Plan(trials=3, warmup_min_s=0.0)
    device = TorchDevice(flush_bytes=1 << 27)
    steady, slow = measure([fn], device, plan), measure([slow_host], device, plan)
    unheld = measure([slow_host], device, plan.with_overrides(host_ahead_reps=0.0))
    for name, m in (("steady", steady), ("slow host", slow), ("slow, no hold", unheld)):
        print(f"{name}: {statistics.median(m.samples) * 1e6:.1f} us, hold "
              f"{m.rep_hold_s * 1e6:.0f} us, host {m.host_rep_s * 1e6:.0f} us a rep, "
              f"reps queued {m.reps_queued}")
    assert steady.rep_hold_s == 0.0 and min(steady.reps_queued) > 3
    assert slow.rep_hold_s >= 300e-6 and min(slow.reps_queued) > 1
    assert statistics.median(slow.samples) == pytest.approx(
        statistics.median(steady.samples), rel=0.05)
    assert max(unheld.reps_queued) < 2  # what the hold prevents
    assert statistics.median(unheld.samples) > 1.5 * statistics.median(steady.samples)


def test_a_flush_by_reading_evicts_and_costs_no_more_than_one_by_writing():
    """A 16 MB copy fits the L2 of an H200 (50 MB): without a flush it reads from the
    cache; a flush by reading (plan key ``flush_by_reading``) sends it to memory again. A
    flush by writing leaves dirty lines the timed call may write back: on an H200
    (GPU-38de9528, 2026-12-04) 8.26 against 7.23 us by reading in one run, 8.58 against 8.42 in the
    next, ~6 us unflushed."""
    import torch

    from kperf.core.device import TorchDevice
    from kperf.core.timing import Plan, measure

    x = torch.randn(1 << 21, device="cuda")  # 8 MB in, 8 MB out
    y = torch.empty_like(x)
    fn = lambda: torch.mul(x, 2.0, out=y)
    device = TorchDevice(flush_bytes=1 << 27)
    plan = Plan(trials=5, warmup_min_s=0.0, graph_below_s=0.0)
    warm = measure([fn], device, plan.with_overrides(flush_l2=False))
    written, read = (measure([fn], device, plan.with_overrides(flush_by_reading=by_reading))
                     for by_reading in (False, True))
    us = {name: statistics.median(m.samples) * 1e6
          for name, m in (("warm", warm), ("written", written), ("read", read))}
    print(us)
    assert us["read"] > 1.2 * us["warm"]
    assert us["read"] < 1.05 * us["written"]


@pytest.mark.parametrize("backend", ["triton", "tilelang"])
def test_placed_outputs_on_the_gpu_are_each_copys_own_and_right(backend):
    """Plan key ``placed_outputs`` with a real kernel: where the op allocates its output
    through torch in Python (Triton's wrapper; TileLang's adapter, when it does), each
    copy's output lies in its own arena slot and holds the original's values."""
    import torch

    from kperf.suites.case import PAGE_BYTES, CaseRunner

    runner = CaseRunner()
    spec = {"op": "rmsnorm", "case": "deepseek-v3.kv_a_norm", "dtype": "bf16",
            "backend": backend}
    prepared = runner.prepare(spec)
    expected = [call() for call in prepared.calls]  # copies cycle over the input sets
    placed = runner.placed_in_arena(prepared, 4, 256 * PAGE_BYTES, outputs=True)
    lo = runner._arena.data_ptr()
    hi = lo + runner._arena.numel()
    outs = [call() for call in placed.calls]
    inside = [lo <= y.data_ptr() < hi for y in outs]
    print(backend, "outputs inside the arena:", inside)
    if backend == "triton":
        assert all(inside) and len({y.data_ptr() for y in outs}) == len(outs)
    for i, y in enumerate(outs):
        torch.testing.assert_close(y, expected[i % len(expected)])
    runner.release_placed()


@pytest.mark.parametrize("backend", ["tilelang", "triton", "torch"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_gemm_is_correct_on_the_gpu(backend, dtype):
    from kperf.core.prepare import prepare
    from kperf.ops.registry import get_op
    from kperf.ops.targets import current_device_target

    for case in ("square-4096", "llama3-8b.gate_up_proj.decode16"):
        p = prepare(get_op("gemm"), case, dtype, backend, current_device_target())
        assert p.agreement.mismatched == 0


@pytest.mark.parametrize(("op_name", "backend"), testing.gpu_cases(testing.ops()))
def test_every_ops_backends_are_correct_on_the_gpu(op_name, backend):
    """Each backend of each op (a new one included), its smallest case in each dtype,
    checked against its reference on the GPU before anything times it."""
    testing.assert_correct_on_gpu(op_name, backend)


def test_telemetry_reads_the_gpu():
    from kperf.core.telemetry import open_source

    source = open_source()
    try:
        reading = source.read()
        assert source.backend in ("nvml", "amdsmi", "sysfs"), source.reason
        assert reading.sm_clock_mhz and reading.sm_clock_mhz > 100
        assert reading.power_w and reading.power_w > 10
    finally:
        source.close()


def test_every_ops_inputs_are_drawn_on_the_device_the_same_per_seed():
    """``kperf.ops.op.seeded``: inputs drawn on the GPU (the host took 5 s for the largest
    GEMM case), so each tensor is born there, and a seed still fixes its values."""
    import torch

    from kperf.ops.registry import get_op, op_names

    for op in map(get_op, op_names()):
        case = min(op.cases, key=lambda c: sum(c.dims.values()))
        dtype = op.dtypes[0]
        first, again, other = (op.make_inputs(case, dtype, "cuda", s) for s in (0, 0, 1))
        tensors = [t for t in first if isinstance(t, torch.Tensor)]
        assert tensors and all(t.is_cuda for t in tensors), op.name
        for a, b in zip(first, again, strict=True):
            assert not isinstance(a, torch.Tensor) or torch.equal(a.float(), b.float()), op.name
        assert not torch.equal(tensors[0].float(), other[0].float()), op.name


def test_the_cool_rule_ends_a_copys_warm_up_after_a_capped_gemm_early_at_its_level():
    """The cool rule (``Plan.cool_warmup_min_s``) on the real board: right after a GEMM at
    the 700 W cap, a 256 MB copy (well under it) ends its warm-up before the averaged
    reading's second, once the reading has come down, and reads what a full warm-up
    reads; the GEMM never ends early, from idle either, where the averaged reading starts
    low and only the energy counter sees its load."""
    import time

    import torch

    from kperf.core.device import TorchDevice
    from kperf.core.telemetry import open_source
    from kperf.core.timing import Plan, measure

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    gemm = [lambda: a @ a]
    src = torch.randn(1 << 26, device="cuda")
    dst = torch.empty_like(src)
    copy = [lambda: dst.copy_(src)]
    device, source = TorchDevice(flush_bytes=1 << 27), open_source()
    plan = Plan(trials=5, energy_s=0)

    def after_gemm(calls, p):
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            gemm[0]()
        torch.cuda.synchronize()
        return measure(calls, device, p, source)

    time.sleep(3.0)  # idle: the averaged reading starts low and lags the GEMM's load
    from_idle = measure(gemm, device, plan, source)
    capped = after_gemm(gemm, plan)
    quick = after_gemm(copy, plan)
    full = after_gemm(copy, plan.with_overrides(cool_warmup_min_s=0.0))
    print(f"gemm from idle {from_idle.warmup_s:.2f} s cool={from_idle.warmup_cool} "
          f"trace {from_idle.warmup_trace[:4]}")
    print(f"gemm warm-up {capped.warmup_s:.2f} s cool={capped.warmup_cool}; copy "
          f"{quick.warmup_s:.2f} s cool={quick.warmup_cool} "
          f"{statistics.median(quick.samples) * 1e6:.2f} us, full {full.warmup_s:.2f} s "
          f"{statistics.median(full.samples) * 1e6:.2f} us")
    assert not from_idle.warmup_cool and from_idle.warmup_s >= plan.warmup_min_s
    assert not capped.warmup_cool
    assert quick.warmup_cool and quick.warmup_s < full.warmup_s and quick.warmup_s < 1.0
    assert statistics.median(quick.samples) == pytest.approx(
        statistics.median(full.samples), rel=0.01)
