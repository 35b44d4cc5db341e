"""What a gate run measured so far: ``blocks.jsonl``'s rows, appended as each block ends
(one JSON line per block, flushed and synced), and what they say: rounds done, a case's
wall time and power, the verdicts. ``prepares.jsonl`` says what each preparation cost."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict
from typing import Any

from kperf.gate.blocks import BlockLog, case_data, case_wall_s
from kperf.gate.config import Thresholds
from kperf.gate.model import Block, Verdict
from kperf.gate.plan import GatePlan, Lane
from kperf.gate.sequential import replay


class Ledger:
    def __init__(self, plan: GatePlan, th: Thresholds):
        self.plan, self.th = plan, th
        self.blocks = BlockLog(plan.pr_dir / "blocks.jsonl")
        self.rows = self.blocks.read()
        self.by_name = {c["name"]: c for c in plan.cases}
        self.prepare_lock = threading.Lock()
        self.started = time.monotonic() - sum(r.get("wall_s", 0.0) for r in self.rows)

    def last_generation(self) -> int:
        return max((r.get("generation", 0) for r in self.rows), default=0)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def record(self, case: dict[str, Any], block: Block, lane: Lane) -> None:
        block.t = time.time()
        extra = {"lane": lane.label}
        self.blocks.append(case, block, extra)
        self.rows.append({"case": case["name"], "env": case.get("env", ""), **asdict(block),
                          **extra})

    def note_prepare(self, case: dict[str, Any], side: str, generation: int, wall_s: float,
                     reply: Any) -> None:
        """One line of ``prepares.jsonl``: what a new pair's preparation of a case cost
        (the first case of a worker also pays its GPU context)."""
        row = {"case": case["name"], "side": side, "generation": generation,
               "wall_s": round(wall_s, 4), "t": time.time()}
        if isinstance(reply, dict):
            row.update(worker_s=reply.get("wall_s"), first_call_s=reply.get("first_call_s"),
                       compile=reply.get("compile"))
        with self.prepare_lock, (self.plan.pr_dir / "prepares.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    def prepared(self, generation: int) -> set[tuple[str, str]]:
        """(case, side) that this generation's pair has already prepared or measured."""
        return {(r["case"], r["side"]) for r in self.rows
                if r.get("generation", 0) == generation}

    def verdicts(self) -> list[Verdict]:
        return replay(case_data(self.plan.cases, self.rows), self.th)

    def history(self, name: str) -> list[Block]:
        return case_data([self.by_name[name]], self.rows)[0].blocks

    def case_wall(self, name: str) -> float:
        return case_wall_s(self.rows, name)

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

    def was_at_cap(self, name: str) -> bool:
        """Whether the case's latest block ended its warm-up at the power cap."""
        return next((bool(r["at_cap"]) for r in reversed(self.rows)
                     if r["case"] == name and r.get("at_cap") is not None), False)
