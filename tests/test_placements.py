"""Placed copies (plan keys ``placements`` and ``placement_arena_gb``, kperf/suites/case.py):
a case's inputs copied to new places in memory for one measurement, on CPU."""

from __future__ import annotations

import itertools

import pytest

PLAN = {"trials": 3, "min_trial_s": 0.01, "min_reps": 2, "warmup_min_s": 0,
        "warmup_max_s": 0, "energy_s": 0}
CASE = ("test-ragged", "fp16", "triton")  # gemm's small CPU case: M 96, N 80, K 72


@pytest.fixture
def on_host(monkeypatch: pytest.MonkeyPatch, triton_interpreter: None) -> None:
    monkeypatch.setenv("KPERF_DEVICE", "cpu")
    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    monkeypatch.delenv("KPERF_TARGET", raising=False)



def test_placements_time_the_same_kernel_on_copies_of_its_inputs(on_host: None) -> None:
    """Plan key ``placements``: every call runs on a copy of the inputs at a new address,
    ``placements`` copies of each input set, gives the same output as the original, and
    the copies are let go when the measurement ends. (torch's backend: this process may
    have imported Triton before ``TRITON_INTERPRET`` was set.)"""
    import torch

    from kperf.suites.case import CaseRunner

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


def test_arena_placements_draw_disjoint_slots_of_one_kept_arena(on_host: None) -> None:
    """Plan key ``placement_arena_gb``: the copies are views of one arena the worker keeps
    from block to block, at slots drawn afresh each block that never overlap, and each
    copy's call gives the original's output."""
    import torch

    from kperf.suites.case import PAGE_BYTES, CaseRunner

    runner = CaseRunner()
    spec = {"op": "gemm", "case": CASE[0], "dtype": "fp32", "backend": "torch"}
    prepared = runner.prepare(spec)
    arena_bytes = 16 * PAGE_BYTES
    drawn = []
    for _ in range(4):
        placed = runner.placed_in_arena(prepared, 5, arena_bytes)
        arena = runner._arena
        assert arena is not None and arena.numel() == arena_bytes
        copies = [x for x in runner._placed if isinstance(x, tuple)]
        assert len(copies) == 5 * len(prepared.inputs) == len(placed.calls)
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size())
                       for x in copies for t in x if isinstance(t, torch.Tensor))
        base = arena.data_ptr()
        assert all(base <= lo and hi <= base + arena_bytes for lo, hi in spans)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # no two overlap
        torch.testing.assert_close(placed.calls[-1](), prepared.calls[-1]())
        drawn.append(tuple(lo for lo, _ in spans))
        runner.release_placed()
        assert runner._arena is arena  # kept: the next block draws slots of the same arena
    assert len(set(drawn)) > 1  # slots drawn afresh (4 draws of 5 of 16 slots)
    result = runner.measure(spec, {**PLAN, "placements": 3, "placement_arena_gb": 0.125})
    assert len(result["samples"]) == PLAN["trials"] and runner._placed == []
    with pytest.raises(ValueError, match="placement_arena_gb"):
        runner.measure(spec, {**PLAN, "placements": 2, "placement_arena_gb": -1})


def test_an_arena_too_small_for_every_copy_holds_as_many_as_fit(on_host: None) -> None:
    from kperf.suites.case import PAGE_BYTES, CaseRunner

    runner = CaseRunner()
    prepared = runner.prepare({"op": "gemm", "case": CASE[0], "dtype": "fp32",
                               "backend": "torch"})
    placed = runner.placed_in_arena(prepared, 16, PAGE_BYTES)
    assert 1 <= len(placed.calls) // len(prepared.inputs) < 16
    runner.release_placed()


def test_placed_outputs_land_in_each_copys_own_slot(on_host: None) -> None:
    """Plan key ``placed_outputs``: a wrapper that allocates its output at every call (as
    a Triton op's does, ``torch.empty_like``) writes it, with each copy's call, inside that
    copy's own arena slot, at a place of its own, with the original's values; without the
    key, outside the arena. (Triton's interpreter allocates through torch itself, so the
    CPU test wraps a torch computation.)"""
    import dataclasses

    import torch

    from kperf.suites.case import PAGE_BYTES, CaseRunner

    def scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        return torch.mul(x, w, out=y)

    runner = CaseRunner()
    spec = {"op": "rmsnorm", "case": "test-ragged", "dtype": "fp16", "backend": "torch"}
    prepared = dataclasses.replace(runner.prepare(spec), fn=scaled)
    expected = [scaled(*inputs) for inputs in prepared.inputs]  # copies cycle over the sets
    arena_bytes = 64 * PAGE_BYTES
    placed = runner.placed_in_arena(prepared, 4, arena_bytes, outputs=True)
    lo = runner._arena.data_ptr()
    hi = lo + runner._arena.numel()
    outs = [call() for call in placed.calls]
    assert all(lo <= y.data_ptr() < hi for y in outs)
    assert len({y.data_ptr() for y in outs}) == len(placed.calls)
    inputs = {t.data_ptr() for copy in runner._placed for t in copy if isinstance(t, torch.Tensor)}
    assert inputs.isdisjoint(y.data_ptr() for y in outs)
    for i, y in enumerate(outs):
        torch.testing.assert_close(y, expected[i % len(expected)])
    again = [call().data_ptr() for call in placed.calls]  # each copy keeps its own place
    assert again == [y.data_ptr() for y in outs]
    runner.release_placed()
    plain = runner.placed_in_arena(prepared, 4, arena_bytes)
    assert not any(lo <= call().data_ptr() < hi for call in plain.calls)
    runner.release_placed()
    result = runner.measure(spec, {**PLAN, "placements": 2, "placement_arena_gb": 0.125,
                                   "placed_outputs": True})
    assert len(result["samples"]) == PLAN["trials"]
    with pytest.raises(ValueError, match="placed_outputs"):
        runner.measure(spec, {**PLAN, "placements": 2, "placed_outputs": True})


def test_placed_outputs_serve_only_plain_allocations_on_the_regions_device() -> None:
    """What kperf/core/outputs.py takes from a region: torch.empty in each way of giving its
    size, torch.empty_like of a contiguous tensor; not a strided copy, not another device's
    or a pinned request, and nothing past the region's end."""
    import torch

    from kperf.core.outputs import FromRegion, output_bytes
    from kperf.core.prepare import ALIGN_BYTES

    region = torch.zeros(4 * ALIGN_BYTES, dtype=torch.uint8)
    lo, hi = region.data_ptr(), region.data_ptr() + region.numel()
    x = torch.ones(8, 16)
    with FromRegion(region):
        served = [torch.empty(4, 8), torch.empty((4, 8), dtype=torch.float16),
                  torch.empty(size=(2, 2), device="cpu"), torch.empty_like(x)]
        kept = [torch.empty_like(x.t()), torch.empty(2, 2, pin_memory=False, device="meta"),
                torch.empty(ALIGN_BYTES * 4)]  # past the region's end
    assert all(lo <= t.data_ptr() < hi for t in served)
    assert len({t.data_ptr() for t in served}) == len(served)
    assert [tuple(t.shape) for t in served] == [(4, 8), (4, 8), (2, 2), (8, 16)]
    assert served[1].dtype == torch.float16
    assert not any(lo <= t.data_ptr() < hi for t in kept if t.device.type == "cpu")
    assert output_bytes(lambda a: torch.empty_like(a), (x,), torch.device("cpu")) == ALIGN_BYTES
