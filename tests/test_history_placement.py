"""The history places a case's buffers as the gate places a block of its class
(kperf/suites/timed.py ``placement_plan``): the classes whose level follows where their
buffers lie (``level_by_placement``) are measured over placed copies, every other class as
its buffers were allocated; a suite whose cases are placed has its own asv version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kperf.project import DEFAULTS
from kperf.suites.timed import placement_plan

from ._bench import asked_plans

REPO = Path(__file__).resolve().parent.parent
NORM = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"
DECODE = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'triton')"
GEMM = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'tilelang')"
STATIC = "bench_gemm.GemmRegisters.track_value('square-8192', 'fp16', 'triton')"


def _thresholds() -> dict[str, Any]:
    return json.loads((DEFAULTS / "thresholds.json").read_text())


def test_only_classes_whose_level_follows_placement_are_placed() -> None:
    from kperf.suites.timed import placement_plan

    bandwidth = _thresholds()["classes"]["bandwidth"]
    assert placement_plan(NORM) == {
        "placements": bandwidth["placements"],
        "placement_arena_gb": bandwidth["placement_arena_gb"],
        "placed_outputs": True, "rep_hold_min_s": bandwidth["rep_hold_min_s"]}
    decode = placement_plan(DECODE)
    assert decode["placements"] == 16 and "placed_outputs" not in decode
    assert placement_plan(GEMM) == {} and placement_plan(STATIC) == {}


def test_a_class_that_stops_following_placement_is_measured_as_allocated(
        tmp_path: Path) -> None:
    from kperf.suites.timed import placement_plan

    raw = _thresholds()
    raw["classes"]["bandwidth"]["level_by_placement"] = False
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(raw))
    assert placement_plan(NORM, path) == {}
    raw["classes"]["bandwidth"].update(level_by_placement=True, placement_arena_gb=0)
    path.write_text(json.dumps(raw))
    assert placement_plan(NORM, path) == {"placements": 16, "rep_hold_min_s": 0.00015}


def test_the_history_places_every_case_as_the_gate_places_its_class() -> None:
    from kperf.gate.config import Thresholds
    from kperf.gate.measure import class_placement
    from kperf.suites.timed import gate_cases, placement_plan

    th = Thresholds.load(DEFAULTS / "thresholds.json")
    placed = 0
    for case in gate_cases():
        _, klass = th.rule_for(case["name"])
        history = placement_plan(case["name"])
        if klass.level_by_placement:
            assert history == class_placement(klass, th.sequential), case["name"]
            placed += 1
        else:
            assert history == {}, case["name"]
    assert placed > 10  # the row ops and the decode GEMMs


@pytest.mark.parametrize(("plan", "arena_gb"), [({}, 16), ({"placement_arena_gb": 2}, 2)])
def test_the_suite_asks_for_its_cases_placement_unless_the_plan_names_its_own(
        monkeypatch: pytest.MonkeyPatch, plan: dict[str, float], arena_gb: float) -> None:
    from benchmarks import bench_gemm, bench_rmsnorm

    monkeypatch.setenv("KPERF_PLAN", json.dumps(plan))
    spec = {"op": "rmsnorm", "case": "llama3-8b.hidden", "dtype": "bf16", "backend": "triton"}
    for asked in asked_plans([bench_rmsnorm.RmsnormTime(), bench_rmsnorm.RmsnormEnergy()], spec):
        assert (asked["placements"], asked["placement_arena_gb"]) == (16, arena_gb)
        assert asked["placed_outputs"] is True
    spec = {"op": "gemm", "case": "square-8192", "dtype": "fp16", "backend": "triton"}
    (asked,) = asked_plans([bench_gemm.GemmTime()], spec)
    assert "placements" not in asked


def test_a_suites_version_is_its_measuring_methods_alone(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """asv starts a new series where a benchmark's version changes: it is kperf's measuring
    method (METHOD_VERSION), never the gate's configuration. A class's placements edited in
    thresholds.json change how its cases are measured (each record carries its plan), not
    which series they continue."""
    import importlib

    from benchmarks import bench_attention, bench_gemm, bench_rmsnorm
    from kperf import project
    from kperf.core import METHOD_VERSION

    suites = (bench_attention.AttentionTime, bench_rmsnorm.RmsnormTime,
              bench_rmsnorm.RmsnormEnergy, bench_gemm.GemmTime, bench_gemm.GemmCompile)
    assert {s.version for s in suites if hasattr(s, "version")} == {METHOD_VERSION}
    raw = _thresholds()
    raw["classes"]["bandwidth"]["placements"] = 8
    (tmp_path / "thresholds.json").write_text(json.dumps(raw))
    (tmp_path / "kperf.toml").write_text((project.find().config).read_text())
    monkeypatch.setenv(project.PROJECT_ENV, str(tmp_path))
    assert project.find().thresholds == tmp_path / "thresholds.json"
    again = importlib.reload(bench_rmsnorm)
    assert again.RmsnormTime.version == METHOD_VERSION
    assert placement_plan(NORM)["placements"] == 8  # measured another way, same series


def test_a_placed_case_is_measured_over_its_copies_and_says_so(
        cpu_bench: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bandwidth case on the CPU through the real worker: its record carries the plan it
    was measured with, and its trials ran over the placed copies (each call its own)."""
    from benchmarks import bench_rmsnorm
    from tests._bench import BENCH_PLAN

    arena_gb = 0.01
    monkeypatch.setenv("KPERF_PLAN", json.dumps({**BENCH_PLAN, "placement_arena_gb": arena_gb}))
    case = ("test-ragged", "fp16", "triton")
    suite = bench_rmsnorm.RmsnormTime()
    suite.setup(*case)
    try:
        suite.track_time(*case)
    finally:
        suite.worker.shutdown()
    (path,) = cpu_bench.rglob("*.json")
    rec = json.loads(path.read_text())
    assert rec["plan"]["placements"] == 16 and rec["plan"]["placed_outputs"] is True
    assert rec["plan"]["placement_arena_gb"] == arena_gb
    sets = rec["measurement"]["input_set_medians_s"]
    assert len(sets) > 1 and all(s > 0 for s in sets)
