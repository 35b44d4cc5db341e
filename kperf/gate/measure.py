"""Measuring a gate: rounds of blocks until every case is decided or the budget is spent,
a fresh pair of workers (kperf/gate/workers.py) for each round, SLOW / FAST re-measured.

Everything measured is appended to ``blocks.jsonl`` as it happens (``blocks.Ledger``);
``gate-state.json`` says what the run is. A run that is cut off (a device call's limit,
Ctrl-C) resumes from both (``--resume``), and ``--no-run`` decides a stored run again
from them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kperf.core.worker import RemoteError, RemoteSkip, WorkerClient, WorkerError
from kperf.gate.blocks import Ledger, block_of, failed_block
from kperf.gate.config import KernelClass, Sequential, Thresholds
from kperf.gate.disturbed import disturbance
from kperf.gate.jobs import join, threads
from kperf.gate.model import SIDES, Block, Verdict
from kperf.gate.plan import GatePlan, Lane
from kperf.gate.sequential import awaiting_confirmation, key
from kperf.gate.workers import PREPARE_TIMEOUT_S, Pairs, gate_worker
from kperf.specs import GateCase

BLOCK_TIMEOUT_S = 300.0
# Cold compiles a compile block takes: the rounds (base and head alternating) are the
# replicates, each block's figure the CPU seconds of its compile, which other processes
# on the host move much less than its wall time (docs/perf.md, "Compile time on a shared
# host").
COMPILE_SAMPLES = 1
# Compile cases measured at once, each by its own pair of codegen workers (the cores of a
# GitHub-hosted runner, 4; 2 on the CPU machine); a SLOW or FAST's confirming pair is a
# fresh one numbered from CONFIRM_GENERATIONS.
COMPILE_PARALLEL = max(1, min(4, os.cpu_count() or 1))
CONFIRM_GENERATIONS = 1000
CONFIRM_RESERVE = 0.85  # the rounds stop at this share of the gate's budget: room to confirm


def class_placement(klass: KernelClass, seq: Sequential) -> dict[str, Any]:
    """The plan keys that place a block's buffers for its class: its inputs in
    ``placements`` copies (the class's, else ``sequential.placements``), from slots of an
    arena where the class has one, its outputs too (``placed_outputs``), and the class's
    hold before every rep. The history places a ``level_by_placement`` class's cases
    alike (kperf/suites/timed.py ``placement_plan``)."""
    placements = seq.placements if klass.placements is None else klass.placements
    return {**({"placements": placements} if placements else {}),
            **({"placement_arena_gb": klass.placement_arena_gb,
                **({"placed_outputs": True} if klass.placed_outputs else {})}
               if placements and klass.placement_arena_gb else {}),
            **({"rep_hold_min_s": klass.rep_hold_min_s} if klass.rep_hold_min_s else {})}


class Measurer:
    """Blocks measured by the current pair: a case's two sides in a round (measured again
    when the round was disturbed), a new pair's preparation of its cases, static figures."""

    def __init__(self, plan: GatePlan, th: Thresholds, pairs: Pairs, ledger: Ledger,
                 stopping: threading.Event, log: Callable[[str], None]):
        self.plan, self.th, self.pairs, self.ledger, self.log = plan, th, pairs, ledger, log
        self.stopping = stopping  # the run was cut off: no block more
        self.index = {c["name"]: i for i, c in enumerate(plan.cases)}

    def block(self, lane: Lane, case: GateCase, side: str, round_: int,
              confirm: bool = False, retry: int = 0) -> Block:
        seq = self.th.sequential
        _, klass = self.th.rule_for(case["name"])
        plan = {"trials": seq.trials_per_block, "energy_s": 0,
                **({"trials_at_cap": seq.trials_at_cap} if seq.trials_at_cap else {}),
                **class_placement(klass, seq)}
        start = time.monotonic()
        try:
            result = self.pairs.client(lane, side).request(
                {"op": "measure", "spec": case["spec"], "plan": plan}, BLOCK_TIMEOUT_S)
            block = block_of(result, side, round_, confirm, self.pairs.generation)
        except (RemoteError, RemoteSkip, WorkerError) as err:
            block = failed_block(side, round_, err, confirm, self.pairs.generation)
        block.wall_s, block.retry = time.monotonic() - start, retry
        self.ledger.record(case, block, lane)
        return block

    def round(self, lane: Lane, number: int, names: Sequence[str], confirm: bool) -> None:
        for name in names:
            case = self.ledger.by_name[name]
            if not self.ledger.was_at_cap(name):
                self.pairs.wait_for_ahead()
            if self.stopping.is_set():
                return
            # A B, then B A, ... for every case: what drifts within a round cancels
            order = SIDES if (number + self.index[name]) % 2 == 0 else SIDES[::-1]
            why = self.disturbance(name, self.sides(lane, case, order, number, confirm))
            if why:
                self.log(f"round {number}: {name} measured again: {why}")
                self.sides(lane, case, order, number, confirm, retry=1)

    def sides(self, lane: Lane, case: GateCase, order: Sequence[str], number: int,
              confirm: bool, retry: int = 0) -> list[Block]:
        blocks: list[Block] = []
        for side in order:
            if self.stopping.is_set():
                break
            blocks.append(self.block(lane, case, side, number, confirm, retry))
            if blocks[-1].status != "ok":
                break
        return blocks

    def disturbance(self, name: str, blocks: Sequence[Block]) -> str:
        """Why a round's blocks are to be measured again ('' if they are not)."""
        if len(blocks) < 2 or any(b.status != "ok" for b in blocks):
            return ""
        seq = self.th.sequential
        return disturbance(self.ledger.history(name), len(blocks), seq.disturbed_factor,
                           seq.disturbed_floor, seq.host_behind_share)

    def prepare(self, lane: Lane, cases: Sequence[GateCase], round_: int = 1,
                confirm: bool = False) -> None:
        """Start this generation's pair of workers and compile and check every case on
        both sides (the two in parallel), so a compile error or a wrong result ends that
        case and compiles stay out of the rounds."""
        done = self.ledger.prepared(self.pairs.generation)

        def side_job(side: str) -> None:
            batch = [case["spec"] for case in cases if (case["name"], side) not in done]
            for case in cases:
                if (case["name"], side) in done:
                    continue
                start = time.monotonic()
                try:
                    reply = self.pairs.client(lane, side).request(
                        {"op": "prepare", "spec": case["spec"], "batch": batch},
                        PREPARE_TIMEOUT_S)
                    self.ledger.note_prepare(case, side, self.pairs.generation,
                                             time.monotonic() - start, reply)
                except (RemoteError, RemoteSkip, WorkerError) as err:
                    self.ledger.record(case, failed_block(side, round_, err, confirm,
                                                          self.pairs.generation), lane)

        with threads(2, self.stopping) as pool:
            join([pool.submit(side_job, side) for side in SIDES])

    def static(self, case: GateCase, lane: Lane) -> None:
        for side in SIDES:
            start = time.monotonic()
            try:
                figures = self.pairs.client(lane, side, static=True).request(
                    {"op": "static", "spec": case["spec"], "target": case["target"],
                     **toolchain_of(case, side)},
                    PREPARE_TIMEOUT_S)
                value = figures["figures"].get(case["figure"])
                block = (Block(side, 1, value=float(value),
                               figures={**figures["figures"], "config": figures.get("config")})
                         if value is not None else
                         Block(side, 1, "skipped", f"{case['figure']} not derivable from "
                               f"{figures['artifacts']}"))
            except (RemoteError, RemoteSkip, WorkerError) as err:
                block = failed_block(side, 1, err)
            block.wall_s = time.monotonic() - start
            self.ledger.record(case, block, lane)

    def compile_block(self, case: GateCase, lane: Lane, side: str, round_: int,
                      confirm: bool, generation: int) -> Block:
        """``COMPILE_SAMPLES`` cold compiles of a kernel to a device binary by one side's
        codegen worker, their CPU seconds the block's samples (``generation`` 0: the
        static figures' worker; later: fresh ones that confirm a SLOW or FAST)."""
        start = time.monotonic()
        try:
            reply = self.pairs.client(lane, side, static=True, generation=generation).request(
                {"op": "compile", "spec": case["spec"], "target": case["target"],
                 "repeat": COMPILE_SAMPLES,
                 **toolchain_of(case, side)},
                PREPARE_TIMEOUT_S)
            block = Block(side, round_, samples=list(reply["samples"]), confirm=confirm,
                          generation=generation, figures={"code_sha": reply.get("code_sha"),
                                                          "wall_s": reply.get("wall_s")})
        except (RemoteError, RemoteSkip, WorkerError) as err:
            block = failed_block(side, round_, err, confirm, generation)
        block.wall_s = time.monotonic() - start
        self.ledger.record(case, block, lane)
        return block

    def compile_rounds(self, case: GateCase, lane: Lane, generation: int = 0) -> None:
        """A cold compile's rounds, base and head alternating, until its verdict is
        decided, ``max_rounds`` or the case's budget (``case_wall_s``), in the codegen
        workers of ``generation``; a SLOW or FAST is then confirmed by ``confirm_rounds``
        rounds of a fresh pair of codegen workers. Compiles are host work: the sides'
        order alternates so that what the host does meanwhile falls on both."""
        seq, name = self.th.sequential, case["name"]
        done = {r["round"] for r in self.ledger.rows if r["case"] == name and not r["confirm"]}
        for number in range(max(done, default=0) + 1, seq.max_rounds + 1):
            if (self.stopping.is_set() or self._compile_verdict(name).decided
                    or self.ledger.case_wall(name) >= self.th.case_wall_s):
                break
            self._compile_round(case, lane, number, False, generation)
        verdict = self._compile_verdict(name)
        if verdict.candidate and verdict.confirmed is None and not self.stopping.is_set():
            first = max((r["round"] for r in self.ledger.rows if r["case"] == name), default=0)
            fresh = CONFIRM_GENERATIONS + self.index[name]  # a pair no other case uses
            for number in range(first + 1, first + 1 + seq.confirm_rounds):
                self._compile_round(case, lane, number, True, fresh)

    def _compile_round(self, case: GateCase, lane: Lane, number: int, confirm: bool,
                       generation: int) -> None:
        order = SIDES if (number + self.index[case["name"]]) % 2 == 0 else SIDES[::-1]
        for side in order:
            if self.compile_block(case, lane, side, number, confirm, generation).status != "ok":
                return

    def _compile_verdict(self, name: str) -> Verdict:
        return next(v for v in self.ledger.verdicts() if v.case == name)


class Run:
    """The course of a gate run: static figures, rounds until every case is decided or
    the budget is spent, a fresh pair of workers when one is due, then the re-measure."""

    def __init__(self, plan: GatePlan, th: Thresholds, sites: dict[str, Path],
                 make_client: Callable[..., WorkerClient] = gate_worker,
                 log: Callable[[str], None] = print):
        self.plan, self.th, self.log = plan, th, log
        self.ledger = Ledger(plan, th)
        self.pairs = Pairs(plan, sites, make_client, self.ledger.last_generation())
        self.stopping = threading.Event()  # the run was cut off: no block more
        self.measurer = Measurer(plan, th, self.pairs, self.ledger, self.stopping, log)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.ledger.rows

    @property
    def generation(self) -> int:
        return self.pairs.generation

    @property
    def pair_rounds(self) -> int | None:
        return self.pairs.rounds

    @pair_rounds.setter
    def pair_rounds(self, rounds: int | None) -> None:
        self.pairs.rounds = rounds

    def threads(self, workers: int) -> contextlib.AbstractContextManager[ThreadPoolExecutor]:
        return threads(workers, self.stopping)

    def verdicts(self) -> list[Verdict]:
        return self.ledger.verdicts()

    def retire_workers(self, spare_too: bool = True) -> None:
        self.pairs.retire(spare_too)

    def round(self, lane: Lane, number: int, names: Sequence[str], confirm: bool) -> None:
        self.measurer.round(lane, number, names, confirm)

    def pair_due(self) -> bool:
        return self.pairs.due(self.th.sequential.rounds_per_generation)

    def new_generation(self, generation: int, names: dict[str, list[str]], round_: int,
                       confirm: bool = False) -> None:
        """Retire the pair of workers that measured so far and start a fresh pair: each
        pair has an offset of its own (docs/gate.md, "A fresh pair of workers every round")."""
        how = self.pairs.replace(generation)
        start = time.monotonic()
        for lane in self.plan.lanes:
            self.measurer.prepare(lane, [self.ledger.by_name[n]
                                         for n in names.get(lane.label, [])], round_, confirm)
        count = sum(len(v) for v in names.values())
        self.log(f"pair {generation}: {how}; {count} case(s) prepared on both sides in "
                 f"{time.monotonic() - start:.1f} s")

    def open_time_cases(self, lane: Lane) -> list[str]:
        """Cases to measure this round, the most power-hungry first: at a power cap a
        change of load makes the clock swing for ~1 s, and neighbours of similar power
        change the load least (docs/journal/2026-12-01.md, "Warm-up at the power cap")."""
        still = {name for env, name in (key(v) for v in self.verdicts() if not v.decided)}
        budget, by_name = self.th.case_wall_s, self.ledger.by_name
        names = [n for n in lane.cases if n in still and by_name[n]["kind"] == "time"
                 and self.ledger.case_wall(n) < budget]
        return sorted(names, key=lambda n: -self.ledger.power(n))

    def run(self) -> str:
        """Measure until every case is decided; returns why the rounds stopped."""
        by_name, rows = self.ledger.by_name, self.ledger.rows
        statics = [(c, lane) for lane in self.plan.lanes for c in map(by_name.get, lane.cases)
                   if c["kind"] == "static" and not any(r["case"] == c["name"] for r in rows)]
        timed = any(c["kind"] == "time" for c in self.plan.cases)
        if not timed:  # first: their compiles leave the static figures in the cache
            self._compiles()
        with self.threads(2) as pool:
            static_jobs = [pool.submit(self.measurer.static, c, lane) for c, lane in statics]
            if timed:
                if self.ledger.rounds_done() == 0:  # the first pair (a resumed run's: new)
                    for lane in self.plan.lanes:
                        self.measurer.prepare(lane, [by_name[n] for n in lane.cases
                                                     if by_name[n]["kind"] == "time"])
                    self.pair_rounds = 0
                stopped = self._rounds()
            else:  # what ends a compile case's rounds is its verdict or max_rounds
                stopped = (f"a compile case's rounds end at its verdict, at "
                           f"{self.th.sequential.max_rounds} rounds or at its budget of "
                           f"{self.th.case_wall_s:.0f} s")
            join(static_jobs)
        self._confirm()
        if timed:  # after the timed rounds: a compile's host load would disturb them
            self._compiles()
        return stopped

    def _compiles(self) -> None:
        """The compile cases' rounds, ``COMPILE_PARALLEL`` cases at a time, each in a pair
        of codegen workers of its own while it runs: a case's figure is CPU seconds,
        which another compile on another core moves little (docs/gate.md)."""
        cases = [(self.ledger.by_name[n], lane) for lane in self.plan.lanes for n in lane.cases
                 if self.ledger.by_name[n]["kind"] == "compile"]
        free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for generation in range(2, 2 + COMPILE_PARALLEL):
            free.put(generation)

        def job(case: GateCase, lane: Lane) -> None:
            generation = free.get()
            try:
                if not self.stopping.is_set():
                    self.measurer.compile_rounds(case, lane, generation)
            finally:
                free.put(generation)

        with self.threads(COMPILE_PARALLEL) as pool:
            join([pool.submit(job, case, lane) for case, lane in cases])

    def _rounds(self) -> str:
        number = self.ledger.rounds_done()
        while True:
            lanes = {lane.label: self.open_time_cases(lane) for lane in self.plan.lanes}
            if not any(lanes.values()):
                return "every case decided"
            if number >= self.th.sequential.max_rounds:
                return f"{number} rounds, the most allowed"
            if self.ledger.elapsed() > CONFIRM_RESERVE * self.th.gate_wall_s:
                return f"the gate's budget of {self.th.gate_wall_s:.0f} s spent"
            number += 1
            if self.pair_due():
                self.new_generation(self.generation + 1, lanes, number)
            if self.pairs.rounds + 1 >= self.th.sequential.rounds_per_generation:
                # the next pair takes over after this round
                self.pairs.start_ahead({label: [self.ledger.by_name[n]["spec"] for n in names]
                                        for label, names in lanes.items()})
            self.log(f"round {number}: " + ", ".join(
                f"{len(v)} case(s) on {k}" for k, v in lanes.items() if v)
                + f" ({self.ledger.elapsed():.0f} s)")
            with self.threads(len(self.plan.lanes)) as pool:
                join([pool.submit(self.round, lane, number, lanes[lane.label], False)
                      for lane in self.plan.lanes])
            self.pairs.rounds += 1

    def _confirm(self) -> None:
        """SLOW / FAST candidates measured again by fresh worker processes."""
        waiting = {name for _, name in awaiting_confirmation(self.verdicts())
                   if self.ledger.by_name[name]["kind"] == "time"}
        if not waiting:
            return
        self.log(f"re-measuring {len(waiting)} flagged case(s) with fresh workers")
        first = self.ledger.rounds_done() + 1
        names = {lane.label: [n for n in lane.cases if n in waiting] for lane in self.plan.lanes}
        self.new_generation(self.generation + 1, names, first, confirm=True)
        for offset in range(self.th.sequential.confirm_rounds):
            with self.threads(len(self.plan.lanes)) as pool:
                join([pool.submit(self.round, lane, first + offset,
                                  [n for n in lane.cases if n in waiting], True)
                      for lane in self.plan.lanes])


def toolchain_of(case: GateCase, side: str) -> dict[str, str]:
    """The gfx942 toolchain a side compiles a case's TileLang HIP source with (an upgrade
    report's head: ``toolchain_head``, the candidate), as a request's field; {} for none."""
    chain = (side == "head" and case.get("toolchain_head")) or case.get("toolchain")
    return {"toolchain": chain} if chain else {}
