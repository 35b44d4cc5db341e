"""The gate's measuring run (kperf/gate/measure.py) against fake workers: which side goes
first, generations of worker pairs, the next pair started ahead, every worker (the
static figures' too) stopped at the end, and which blocks may share the host with a pair
importing."""

from __future__ import annotations

import json
from pathlib import Path

from kperf.gate import cli
from kperf.gate.measure import Run
from kperf.gate.plan import Lane
from tests._gate import FakeClient, OpLog, _run_to_the_end


def test_each_case_alternates_which_side_goes_first(tmp_path: Path, th) -> None:
    log: list = []
    clients = {}

    def make_client(slot: str, **kw) -> FakeClient:
        side = "base" if "-base-" in slot else "head"
        return clients.setdefault(slot, FakeClient(side, log))

    cases = [{"name": f"c{i}", "kind": "time", "spec": {"case": f"c{i}"}} for i in range(3)]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=[c["name"] for c in cases])])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=lambda s: None)
    for number in (1, 2, 3, 4):
        run.round(plan.lanes[0], number, [c["name"] for c in cases], False)
    for name in ("c0", "c1", "c2"):
        firsts = [side for k, (c, side) in enumerate(log) if c == name and k % 2 == 0]
        assert firsts in (["base", "head"] * 2, ["head", "base"] * 2), (name, firsts)
    # every block moves its buffers and takes the configured trials, without an energy burst
    seq = th.sequential
    assert seq.placements > 0
    assert seq.placements > 0 and seq.trials_at_cap > seq.trials_per_block
    assert all(p == {"trials": seq.trials_per_block, "energy_s": 0, "placements": seq.placements,
                     "trials_at_cap": seq.trials_at_cap}
               for c in clients.values() for p in c.plans)


def _one_rounds_plans(tmp_path: Path, th, names: list[str]) -> dict[str, dict]:
    """The plan each case's blocks asked their workers for, in one round."""
    log: list = []
    clients: dict[str, FakeClient] = {}

    def make_client(slot: str, **kw) -> FakeClient:
        return clients.setdefault(slot, FakeClient("base" if "-base-" in slot else "head", log))

    cases = [{"name": n, "kind": "time", "spec": {"case": n}} for n in names]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=list(names))])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=lambda s: None)
    run.round(plan.lanes[0], 1, list(names), False)
    return {case: p for client in clients.values()
            for case, p in zip([c for c, side in log if side == client.side], client.plans,
                               strict=True)}


DECODE = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'triton')"


def test_a_decode_case_draws_its_classs_copies_from_an_arena(tmp_path: Path, th) -> None:
    """A class's own ``placements`` and ``placement_arena_gb`` reach its blocks' plans; the
    other classes keep the sequential setting."""
    other = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'triton')"
    plans = _one_rounds_plans(tmp_path, th, [DECODE, other])
    klass = th.classes["decode"]
    assert klass.placements and klass.placement_arena_gb > 0
    assert plans[DECODE]["placements"] == klass.placements
    assert plans[DECODE]["placement_arena_gb"] == klass.placement_arena_gb
    assert plans[other]["placements"] == th.sequential.placements
    assert "placement_arena_gb" not in plans[other]


def test_a_bandwidth_case_places_its_outputs_and_a_decode_case_does_not(tmp_path: Path,
                                                                         th) -> None:
    """A class's ``placed_outputs`` reaches its blocks' plans (a TileLang RMSNorm worker's
    blocks 0.55% apart without it, 0.13% with it: H200 GPU-38de9528, 2026-12-04); the decode
    class measures as before."""
    rows = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"
    plans = _one_rounds_plans(tmp_path, th, [rows, DECODE])
    assert th.classes["bandwidth"].placed_outputs and not th.classes["decode"].placed_outputs
    assert plans[rows]["placed_outputs"] is True
    assert plans[rows]["placement_arena_gb"] == th.classes["bandwidth"].placement_arena_gb
    assert "placed_outputs" not in plans[DECODE]


def test_a_bandwidth_case_holds_every_rep_and_a_decode_case_does_not(tmp_path: Path,
                                                                      th) -> None:
    """A class's ``rep_hold_min_s`` reaches its blocks' plans (with a 150 us floor all 24
    RMSNorm blocks of both backends were held alike, a worker's blocks 0.05-0.14% apart:
    H200 GPU-fd64c0f9, 2026-12-04); a class without one puts no floor in its blocks' plans."""
    rows = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"
    plans = _one_rounds_plans(tmp_path, th, [rows, DECODE])
    floor = th.classes["bandwidth"].rep_hold_min_s
    assert floor > 0 and th.classes["decode"].rep_hold_min_s == 0
    assert plans[rows]["rep_hold_min_s"] == floor
    assert "rep_hold_min_s" not in plans[DECODE]


def test_a_resumed_run_starts_a_new_generation_of_workers(tmp_path: Path, th) -> None:
    """A run cut off in the middle of a pair's rounds resumes with new processes: they
    are a new generation, so the statistics never take two pairs' rounds for one pair's."""
    cases = [{"name": "c0", "kind": "time", "spec": {"case": "c0"}}]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=["c0"])])
    clients: dict = {}

    def make_client(slot: str, **kw) -> FakeClient:
        return clients.setdefault(slot, FakeClient("base" if "-base-" in slot else "head", []))

    def run() -> Run:
        return Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client,
                   log=lambda s: None)

    rpg = th.sequential.rounds_per_generation
    with (tmp_path / "blocks.jsonl").open("w") as f:
        for r in range(1, rpg + 2):  # one round into the second pair, then cut off
            for side in ("base", "head"):
                f.write(json.dumps({"case": "c0", "side": side, "round": r,
                                    "generation": (r - 1) // rpg, "samples": [1.0]}) + "\n")
    resumed = run()
    assert resumed.generation == 1 and resumed.pair_due()
    resumed.new_generation(resumed.generation + 1, {"gpu": ["c0"]}, rpg + 2)
    assert resumed.generation == 2 and not resumed.pair_due()
    resumed.pair_rounds = rpg
    assert resumed.pair_due()
    assert {"gate-gpu-base-g2", "gate-gpu-head-g2"} <= set(clients)


def test_the_next_pair_starts_ahead_and_no_worker_outlives_the_run(tmp_path: Path, th) -> None:
    """Every pair after the first got its imports done ("warm", no GPU) before its turn,
    and every worker ever started is stopped at the end, the pair started ahead for a
    round that never came too."""
    events: list = []
    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, OpLog(slot, events))

    cases = [{"name": f"c{i}", "kind": "time", "spec": {"case": f"c{i}"}} for i in range(2)]
    _run_to_the_end(tmp_path, th, cases, make_client)
    assert th.sequential.rounds_per_generation == 1
    used = sorted({int(slot.rsplit("-g", 1)[1]) for slot, op in events if op == "prepare"})
    started = sorted({int(slot.rsplit("-g", 1)[1]) for slot, _ in events
                      if not slot.endswith("-static")})
    assert len(used) >= th.sequential.min_rounds  # a fresh pair every round
    assert set(started) - set(used) <= {max(started)}  # at most the one started ahead
    for g in used[1:]:
        for side in ("base", "head"):
            slot = f"gate-gpu-{side}-g{g}"
            assert [op for s, op in events if s == slot][:2] == ["warm", "prepare"], slot
    for slot in clients:
        assert (slot, "shutdown") in events, slot
    # each prepare names the side's cases still to prepare, to be compiled ahead at once
    first = clients["gate-gpu-base-g1"].batches
    assert first[0] == [c["spec"] for c in cases] and len(first) == len(cases)
    # what each pair's preparation cost, per case and side (docs/journal/2026-12-01.md's restart
    # figures)
    prepared = [json.loads(line) for line in (tmp_path / "prepares.jsonl").open()]
    assert {row["generation"] for row in prepared} == set(used)
    assert {(row["case"], row["side"]) for row in prepared if row["generation"] == used[0]} \
        == {(c, side) for c in ("c0", "c1") for side in ("base", "head")}
    assert all(row["wall_s"] >= 0 for row in prepared)


def test_a_finished_run_stops_its_static_figures_workers_too(tmp_path: Path, th) -> None:
    """The static figures' workers (one a side, idle for GATE_IDLE_S = 900 s) are stopped
    with the timed pairs when the run ends, not left to wait out their idle time."""
    events: list = []
    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, OpLog(slot, events))

    cases = [{"name": "t0", "kind": "time", "spec": {"case": "t0"}},
             {"name": "s0", "kind": "static", "spec": {"case": "s0"}, "target": "sm_90a",
              "figure": "registers"}]
    _run_to_the_end(tmp_path, th, cases, make_client)
    static = {slot for slot, op in events if op == "static"}
    assert static == {"gate-gpu-base-static", "gate-gpu-head-static"}
    assert all((slot, "shutdown") in events for slot in clients)
    last_static = max(i for i, (_, op) in enumerate(events) if op == "static")
    assert all((slot, "shutdown") in events[last_static:] for slot in static)


def test_only_blocks_at_the_power_cap_share_the_host_with_a_pair_importing_ahead(
        tmp_path: Path, th) -> None:
    """A short kernel's block waits until the next pair's imports are over (host load
    slowed a 70 us kernel's block by 7.7% on an H200 on 2026-12-01); a block of a case
    whose last block was at the power cap (long calls, the GPU's queue stays full) goes on
    meanwhile."""
    import time

    events: list = []
    clients: dict = {}

    class Slow(OpLog):
        def request(self, message: dict, timeout_s: float) -> dict:
            if message["op"] == "warm":
                events.append((self.slot, "warm-start"))
                time.sleep(0.3)
                events.append((self.slot, "warm-end"))
                return {"seconds": 0.3, "missing": []}
            out = super().request(message, timeout_s)
            if message["op"] == "measure":
                events.append((message["spec"]["case"], "block"))
                out["measurement"]["at_cap"] = message["spec"]["case"] == "capped"
            return out

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, Slow(slot, events))

    cases = [{"name": n, "kind": "time", "spec": {"case": n}} for n in ("capped", "short")]
    _run_to_the_end(tmp_path, th, cases, make_client)
    importing, overlapped = 0, set()
    for slot, what in events:
        importing += {"warm-start": 1, "warm-end": -1}.get(what, 0)
        if what == "block" and importing:
            overlapped.add(slot)
    assert overlapped == {"capped"}, overlapped
