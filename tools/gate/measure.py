"""Measuring a gate: a measurement worker per side and GPU, rounds of blocks until every
case is decided or the budget is spent, a fresh pair of workers for each round.

Both sides (built by tools/gate/plan.py) live in two workers at once, measured next to
each other in every round by the working tree's ``harness`` and ``benchmarks``.

Everything measured is appended to ``blocks.jsonl`` as it happens (one JSON line per
block, flushed and synced); ``gate-state.json`` says what the run is. A run that is cut
off (a device call's limit, Ctrl-C) resumes from both (``--resume``), and ``--no-run``
decides a stored run again from them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.worker import (
    RemoteError,
    RemoteSkip,
    WorkerClient,
    WorkerError,
    WorkerSpec,
    device_key,
)
from tools.gate.blocks import BlockLog, block_of, case_data, case_wall_s, failed_block
from tools.gate.config import Thresholds
from tools.gate.disturbed import disturbance
from tools.gate.jobs import join, threads
from tools.gate.model import SIDES, Block
from tools.gate.plan import GatePlan, Lane, stack_path
from tools.gate.sequential import awaiting_confirmation, key, replay

PREPARE_TIMEOUT_S = 900.0
BLOCK_TIMEOUT_S = 300.0
CONFIRM_RESERVE = 0.85  # the rounds stop at this share of the gate's budget: room to confirm
# A worker started ahead of its turn waits a round (~1-2 min) before its first measurement;
# the gate stops its workers itself, so they must not time out waiting.
GATE_IDLE_S = 900.0


# --------------------------------------------------------------------------- the run


def gate_worker(slot: str, sys_path: Sequence[str], label: str, env: dict[str, str],
                preload: Path) -> WorkerClient:
    """A worker for one side on one GPU: that side's ``kernels`` first on its path, the
    repository's suite (``benchmarks._case.handle``) as the instrument."""
    return WorkerClient(WorkerSpec(handler="benchmarks._case:handle", sys_path=tuple(sys_path),
                                   device=device_key(env), preload=str(preload), slot=slot,
                                   label=label), idle_s=GATE_IDLE_S, env=env)


class Run:
    def __init__(self, plan: GatePlan, th: Thresholds, sites: dict[str, Path],
                 make_client: Callable[..., WorkerClient] = gate_worker,
                 log: Callable[[str], None] = print):
        self.plan, self.th, self.sites, self.log = plan, th, sites, log
        self.make_client = make_client
        self.blocks = BlockLog(plan.pr_dir / "blocks.jsonl")
        self.rows = self.blocks.read()
        self.by_name = {c["name"]: c for c in plan.cases}
        self.index = {c["name"]: i for i, c in enumerate(plan.cases)}
        self.generation = max((r.get("generation", 0) for r in self.rows), default=0)
        # rounds the current pair of workers measured; None: no pair in this process yet
        self.pair_rounds: int | None = None
        # the next pair, started while this one measures: (its generation, its imports)
        self.ahead: tuple[int, Future[float]] | None = None
        self.background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kperf-ahead")
        self.waited_s = 0.0  # blocks waiting for the next pair's imports, this round
        self.prepare_lock = threading.Lock()
        self.stopping = threading.Event()  # the run was cut off: no block more
        self.started = time.monotonic() - sum(r.get("wall_s", 0.0) for r in self.rows)

    def threads(self, workers: int) -> contextlib.AbstractContextManager[ThreadPoolExecutor]:
        return threads(workers, self.stopping)

    # ---- workers
    def client(self, lane: Lane, side: str, static: bool = False,
               generation: int | None = None) -> WorkerClient:
        generation = self.generation if generation is None else generation
        slot = f"gate-{lane.label}-{side}" + ("-static" if static else f"-g{generation}")
        env = dict(os.environ, **lane.env)
        cache = self.plan.repo / ".cache"  # shared with asv's runs (tools/history/asvrun.py)
        env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
        env.setdefault("TILELANG_CACHE_DIR", str(cache / "tilelang"))
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        if static:
            env["KPERF_DEVICE"] = "static"
        return self.make_client(slot=slot, sys_path=[str(self.sites[side]),
                                                      *stack_path(self.plan.repo)],
                                label=f"{side} {getattr(self.plan, side)[:8]}", env=env,
                                preload=self.plan.repo / "benchmarks" / "__init__.py")

    def retire_workers(self, spare_too: bool = True) -> None:
        """Stop this generation's workers (the GPU's memory back; fresh ones next), and
        the next generation's if they were started ahead and are not to be used. At the
        end of the run (``spare_too``) the static figures' workers too, which would
        otherwise wait out their idle time (``GATE_IDLE_S``)."""
        generations = [self.generation]
        spare, self.ahead = (self.ahead, None) if spare_too else (None, self.ahead)
        if spare is not None:
            generations.append(spare[0])
            spare[1].cancel()
        for generation in generations:
            for lane in self.plan.lanes:
                for side in SIDES:
                    self.client(lane, side, generation=generation).shutdown()
        if spare_too:
            for lane in self.plan.lanes:
                for side in SIDES:
                    self.client(lane, side, static=True).shutdown()
        if spare is not None:  # its request ends once its workers are gone
            with contextlib.suppress(Exception):
                spare[1].result()

    def start_ahead(self, names: dict[str, list[str]]) -> None:
        """Start the next pair of workers now, in the background, and have them import
        what their cases need (torch, the compilers, the ops) without touching the GPU:
        the new pair then costs only its GPU context and its cases' preparation when its
        turn comes (docs/gate.md, "A fresh pair of workers every round")."""
        generation = self.generation + 1
        specs = {label: [self.by_name[n]["spec"] for n in names.get(label, [])]
                 for label in names}

        def job() -> float:  # one worker at a time: one process's host load, as measured
            start = time.monotonic()
            for lane in self.plan.lanes:
                for side in SIDES:
                    self.client(lane, side, generation=generation).request(
                        {"op": "warm", "specs": specs.get(lane.label, [])}, PREPARE_TIMEOUT_S)
            return time.monotonic() - start

        self.ahead = (generation, self.background.submit(job))

    def was_at_cap(self, name: str) -> bool:
        """Whether the case's latest block ended its warm-up at the power cap."""
        return next((bool(r["at_cap"]) for r in reversed(self.rows)
                     if r["case"] == name and r.get("at_cap") is not None), False)

    def wait_for_ahead(self) -> None:
        """Let the next pair finish its imports before a block that the host's load can
        move. A pair importing ahead made a 70 us RMSNorm's block 7.7% slow on an H200
        (docs/journal/2026-12-01.md, 2026-12-01), most likely because its launches fell behind the
        GPU. Kernels at the power cap run 0.6-2 ms a call and keep the queue full; only their
        blocks overlap the imports (the most power-hungry cases go first in a round)."""
        if self.ahead is not None and not self.ahead[1].done():
            start = time.monotonic()
            with contextlib.suppress(RemoteError, RemoteSkip, WorkerError):
                join([self.ahead[1]])
            self.waited_s += time.monotonic() - start

    def _take_ahead(self, generation: int) -> str:
        """Wait for the pair started ahead (if it is this generation); says how it went."""
        if self.ahead is None or self.ahead[0] != generation:
            return "started now"
        self.wait_for_ahead()  # a round shorter than the imports
        _, future = self.ahead
        self.ahead, waited, self.waited_s = None, self.waited_s, 0.0
        try:
            seconds = future.result()
        except (RemoteError, RemoteSkip, WorkerError) as err:
            return f"start ahead failed, started now ({str(err).splitlines()[0][:200]})"
        return (f"started ahead ({seconds:.1f} s of imports, {seconds - min(waited, seconds):.1f}"
                f" s of it under blocks at the power cap)")

    # ---- accounting
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def case_wall(self, name: str) -> float:
        return case_wall_s(self.rows, name)

    def record(self, case: dict[str, Any], block: Block, lane: Lane) -> None:
        extra = {"lane": lane.label, "t": time.time()}
        self.blocks.append(case, block, extra)
        self.rows.append({"case": case["name"], "env": case.get("env", ""), **asdict(block),
                          **extra})

    def verdicts(self):
        return replay(case_data(self.plan.cases, self.rows), self.th)

    # ---- measuring
    def measure_block(self, lane: Lane, case: dict[str, Any], side: str, round_: int,
                      confirm: bool = False, retry: int = 0) -> Block:
        seq = self.th.sequential
        plan = {"trials": seq.trials_per_block, "energy_s": 0,
                **({"trials_at_cap": seq.trials_at_cap} if seq.trials_at_cap else {}),
                **({"placements": seq.placements} if seq.placements else {})}
        start = time.monotonic()
        try:
            result = self.client(lane, side).request(
                {"op": "measure", "spec": case["spec"], "plan": plan}, BLOCK_TIMEOUT_S)
            block = block_of(result, side, round_, confirm, self.generation)
        except (RemoteError, RemoteSkip, WorkerError) as err:
            block = failed_block(side, round_, err, confirm, self.generation)
        block.wall_s, block.retry = time.monotonic() - start, retry
        self.record(case, block, lane)
        return block

    def prepare(self, lane: Lane, cases: Sequence[dict[str, Any]], round_: int = 1,
                confirm: bool = False) -> None:
        """Start this generation's pair of workers and compile and check every case on
        both sides (the two in parallel), so a compile error or a wrong result ends that
        case and compiles stay out of the rounds."""
        done = {(r["case"], r["side"]) for r in self.rows
                if r.get("generation", 0) == self.generation}

        def side_job(side: str) -> None:
            batch = [case["spec"] for case in cases if (case["name"], side) not in done]
            for case in cases:
                if (case["name"], side) in done:
                    continue
                start = time.monotonic()
                try:
                    reply = self.client(lane, side).request(
                        {"op": "prepare", "spec": case["spec"], "batch": batch},
                        PREPARE_TIMEOUT_S)
                    self.note_prepare(case, side, time.monotonic() - start, reply)
                except (RemoteError, RemoteSkip, WorkerError) as err:
                    self.record(case, failed_block(side, round_, err, confirm,
                                                   self.generation), lane)

        with self.threads(2) as pool:
            join([pool.submit(side_job, side) for side in SIDES])

    def note_prepare(self, case: dict[str, Any], side: str, wall_s: float, reply: Any) -> None:
        """One line of ``prepares.jsonl``: what a new pair's preparation of a case cost
        (the first case of a worker also pays its GPU context)."""
        row = {"case": case["name"], "side": side, "generation": self.generation,
               "wall_s": round(wall_s, 4), "t": time.time()}
        if isinstance(reply, dict):
            row.update(worker_s=reply.get("wall_s"), first_call_s=reply.get("first_call_s"),
                       compile=reply.get("compile"))
        with self.prepare_lock, (self.plan.pr_dir / "prepares.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    def new_generation(self, generation: int, names: dict[str, list[str]], round_: int,
                       confirm: bool = False) -> None:
        """Retire the pair of workers that measured so far and start a fresh pair: each
        pair has an offset of its own (docs/gate.md, "A fresh pair of workers every round")."""
        how = self._take_ahead(generation)
        self.retire_workers(spare_too=False)
        self.generation, self.pair_rounds = generation, 0
        start = time.monotonic()
        for lane in self.plan.lanes:
            self.prepare(lane, [self.by_name[n] for n in names.get(lane.label, [])], round_,
                         confirm)
        count = sum(len(v) for v in names.values())
        self.log(f"pair {generation}: {how}; {count} case(s) prepared on both sides in "
                 f"{time.monotonic() - start:.1f} s")

    def static(self, case: dict[str, Any], lane: Lane) -> None:
        for side in SIDES:
            start = time.monotonic()
            try:
                figures = self.client(lane, side, static=True).request(
                    {"op": "static", "spec": case["spec"], "target": case["target"]},
                    PREPARE_TIMEOUT_S)
                value = figures["figures"].get(case["figure"])
                block = (Block(side, 1, value=float(value)) if value is not None else
                         Block(side, 1, "skipped", f"{case['figure']} not derivable from "
                               f"{figures['artifacts']}"))
            except (RemoteError, RemoteSkip, WorkerError) as err:
                block = failed_block(side, 1, err)
            block.wall_s = time.monotonic() - start
            self.record(case, block, lane)

    def round(self, lane: Lane, number: int, names: Sequence[str], confirm: bool) -> None:
        for name in names:
            case = self.by_name[name]
            if not self.was_at_cap(name):
                self.wait_for_ahead()
            if self.stopping.is_set():
                return
            # A B, then B A, ... for every case: what drifts within a round cancels
            order = SIDES if (number + self.index[name]) % 2 == 0 else SIDES[::-1]
            why = self.disturbance(name, self.measure_sides(lane, case, order, number, confirm))
            if why:
                self.log(f"round {number}: {name} measured again: {why}")
                self.measure_sides(lane, case, order, number, confirm, retry=1)

    def measure_sides(self, lane: Lane, case: dict[str, Any], order: Sequence[str],
                      number: int, confirm: bool, retry: int = 0) -> list[Block]:
        blocks: list[Block] = []
        for side in order:
            if self.stopping.is_set():
                break
            blocks.append(self.measure_block(lane, case, side, number, confirm, retry))
            if blocks[-1].status != "ok":
                break
        return blocks

    def disturbance(self, name: str, blocks: Sequence[Block]) -> str:
        """Why a round's blocks are to be measured again ('' if they are not)."""
        if len(blocks) < 2 or any(b.status != "ok" for b in blocks):
            return ""
        seq = self.th.sequential
        history = case_data([self.by_name[name]], self.rows)[0].blocks
        return disturbance(history, len(blocks), seq.disturbed_factor, seq.disturbed_floor,
                           seq.host_behind_share)

    def pair_due(self) -> bool:
        """Whether a fresh pair of workers takes over before the next round: the pair
        measured its ``rounds_per_generation`` rounds, or this process has none yet (a
        resumed run: the old pair's processes are gone, and a new pair is a new
        generation, with an offset of its own)."""
        return (self.pair_rounds is None
                or self.pair_rounds >= self.th.sequential.rounds_per_generation)

    def rounds_done(self) -> int:
        return max((r["round"] for r in self.rows if not r.get("confirm")
                    and self.by_name.get(r["case"], {}).get("kind") == "time"), default=0)

    def power(self, name: str) -> float:
        """The case's board power in its latest block (0 before its first)."""
        for row in reversed(self.rows):
            if row["case"] == name and row.get("power_w"):
                known = [p for p in row["power_w"] if p]
                return sum(known) / len(known) if known else 0.0
        return 0.0

    def open_time_cases(self, lane: Lane) -> list[str]:
        """Cases to measure this round, the most power-hungry first: at a power cap a
        change of load makes the clock swing for ~1 s, and neighbours of similar power
        change the load least (docs/journal/2026-12-01.md, "Warm-up at the power cap")."""
        still = {name for env, name in (key(v) for v in self.verdicts() if not v.decided)}
        budget = self.th.case_wall_s
        names = [n for n in lane.cases if n in still and self.by_name[n]["kind"] == "time"
                 and self.case_wall(n) < budget]
        return sorted(names, key=lambda n: -self.power(n))

    def run(self) -> str:
        """Measure until every case is decided; returns why the rounds stopped."""
        statics = [(c, lane) for lane in self.plan.lanes for c in map(self.by_name.get, lane.cases)
                   if c["kind"] == "static" and not any(r["case"] == c["name"] for r in self.rows)]
        with self.threads(2) as pool:
            static_jobs = [pool.submit(self.static, c, lane) for c, lane in statics]
            if self.rounds_done() == 0:  # the first pair (a resumed run's: a new generation)
                for lane in self.plan.lanes:
                    self.prepare(lane, [self.by_name[n] for n in lane.cases
                                        if self.by_name[n]["kind"] == "time"])
                self.pair_rounds = 0
            stopped = self._rounds()
            join(static_jobs)
        self._confirm()
        return stopped

    def _rounds(self) -> str:
        number = self.rounds_done()
        while True:
            lanes = {lane.label: self.open_time_cases(lane) for lane in self.plan.lanes}
            if not any(lanes.values()):
                return "every case decided"
            if number >= self.th.sequential.max_rounds:
                return f"{number} rounds, the most allowed"
            if self.elapsed() > CONFIRM_RESERVE * self.th.gate_wall_s:
                return f"the gate's budget of {self.th.gate_wall_s:.0f} s spent"
            number += 1
            if self.pair_due():
                self.new_generation(self.generation + 1, lanes, number)
            if self.pair_rounds + 1 >= self.th.sequential.rounds_per_generation:
                self.start_ahead(lanes)  # the next pair takes over after this round
            self.log(f"round {number}: " + ", ".join(
                f"{len(v)} case(s) on {k}" for k, v in lanes.items() if v)
                + f" ({self.elapsed():.0f} s)")
            with self.threads(len(self.plan.lanes)) as pool:
                join([pool.submit(self.round, lane, number, lanes[lane.label], False)
                      for lane in self.plan.lanes])
            self.pair_rounds += 1

    def _confirm(self) -> None:
        """SLOW / FAST candidates measured again by fresh worker processes."""
        waiting = {name for _, name in awaiting_confirmation(self.verdicts())}
        if not waiting:
            return
        self.log(f"re-measuring {len(waiting)} flagged case(s) with fresh workers")
        first = self.rounds_done() + 1
        names = {lane.label: [n for n in lane.cases if n in waiting] for lane in self.plan.lanes}
        self.new_generation(self.generation + 1, names, first, confirm=True)
        for offset in range(self.th.sequential.confirm_rounds):
            with self.threads(len(self.plan.lanes)) as pool:
                join([pool.submit(self.round, lane, first + offset,
                                  [n for n in lane.cases if n in waiting], True)
                      for lane in self.plan.lanes])
