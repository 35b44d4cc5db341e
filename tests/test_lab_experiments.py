"""The stored tools.lab.blocks experiments (tools/lab/experiments/*.json) name real cases
and plan keys a worker accepts: an experiment is sent to a GPU lent for minutes, and a
typo there costs the call."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kperf.core.plan import Plan

EXPERIMENTS = sorted((Path(__file__).resolve().parent.parent / "tools" / "lab" /
                      "experiments").glob("*.json"))
# what kperf/suites/case.py ``measure_prepared`` takes out of a plan before kperf.core.timing
CASE_KEYS = {"placements", "placement_arena_gb", "placed_outputs"}


def _experiments(path: Path) -> list[dict]:
    raw = json.loads(path.read_text())
    return raw.get("experiments", [raw])


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_each_experiment_names_a_real_case_and_known_plan_keys(path: Path) -> None:
    from kperf.ops.registry import get_op

    known = {f.name for f in dataclasses.fields(Plan)} | CASE_KEYS
    for exp in _experiments(path):
        spec = exp["spec"]
        op = get_op(spec["op"])
        op.case(spec["case"])  # raises on an unknown case
        assert spec["backend"] in op.backends, (path.name, spec)
        plans = [exp.get("plan", {})] + [slot.get("plan", {}) for slot in exp["slots"]]
        for plan in plans:
            assert set(plan) <= known, (path.name, sorted(set(plan) - known))
        assert exp.get("rounds", 1) >= 1 and exp["slots"], path.name


def test_the_hold_floor_experiment_holds_its_arms_apart() -> None:
    path = next(p for p in EXPERIMENTS if p.name == "rmsnorm-hold-floor.json")
    for exp in _experiments(path):
        floors = [slot["plan"]["rep_hold_min_s"] for slot in exp["slots"]]
        assert sorted(set(floors))[0] == 0.0 and len(set(floors)) == 4
        assert all(floors.count(f) == 3 for f in set(floors))


def test_the_short_kernel_experiment_pins_a_graph_that_ends_where_it_begins() -> None:
    """The pinned arm's graph is a whole number of rotations over each case's input sets
    (so every call finds its set as long unused as every other), and every arm has three
    workers (one worker stands for one asv run)."""
    from kperf.core.prepare import rotating_sets
    from kperf.ops.registry import get_op
    from kperf.ops.targets import get_target

    path = next(p for p in EXPERIMENTS if p.name == "short-kernel-levels.json")
    l2_bytes = get_target("sm_90a").l2_bytes
    for exp in _experiments(path):
        spec, arms = exp["spec"], [json.dumps(s, sort_keys=True) for s in exp["slots"]]
        assert len(set(arms)) == 3 and all(arms.count(a) == 3 for a in set(arms))
        op = get_op(spec["op"])
        sets = rotating_sets(op.bytes_moved(op.case(spec["case"]), spec["dtype"]), l2_bytes)
        pinned = {s["plan"]["max_graph_calls"] for s in exp["slots"]
                  if "max_graph_calls" in s.get("plan", {})}
        assert len(pinned) == 1 and sets > 1 and pinned.pop() % sets == 0, (exp["name"], sets)


def test_the_kv_a_norm_experiment_places_its_workers_as_the_history_does() -> None:
    """Its question is the history's two levels: every worker is placed as an asv run
    places the case (kperf/suites/timed.py ``placement_plan``), eight workers a dtype."""
    from kperf.suites.timed import case_name, placement_plan

    path = next(p for p in EXPERIMENTS if p.name == "kv-a-norm-levels.json")
    for exp in _experiments(path):
        spec = exp["spec"]
        name = case_name("bench_rmsnorm.RmsnormTime.track_time",
                         [spec["case"], spec["dtype"], spec["backend"]])
        assert len(exp["slots"]) == 8
        assert all(slot["plan"] == placement_plan(name) for slot in exp["slots"])
