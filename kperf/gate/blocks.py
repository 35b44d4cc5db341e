"""``blocks.jsonl``: what a gate run measured, block by block, its reading back, and the
run's ledger of it.

Append-only, one JSON line per block, flushed and synced as it is measured, so a run cut
off anywhere keeps everything measured before (a line cut off by a kill or a full disk is
measured again: the next append first cuts it away, and reading passes over it);
``--resume`` and ``--no-run`` read it back into ``model.CaseData``, each line checked
against kperf/schemas/gate-block.json.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, parse_json, validate
from kperf.core.telemetry import or_bits
from kperf.core.worker import RemoteSkip
from kperf.gate.config import Thresholds
from kperf.gate.errors import GateError
from kperf.gate.model import Block, CaseData, Verdict
from kperf.gate.plan import GatePlan, Lane
from kperf.gate.sequential import replay
from kperf.specs import GateCase

ROW_START = '{"case": '  # how every line ``append`` writes begins


class BlockLog:
    """``blocks.jsonl``: append-only, one synced line per block; read back on resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.repaired = False

    def append(self, case: GateCase, block: Block, extra: dict[str, Any]) -> None:
        line = json.dumps({"case": case["name"], "env": case.get("env", ""),
                           **asdict(block), **extra})
        with self.lock:
            if not self.repaired:
                cut_partial_line(self.path)
                self.repaired = True
            with self.path.open("a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        try:
            lines = self.path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise GateError(f"{self.path}: cannot be read ({err})") from err
        rows = []
        for number, line in enumerate(lines, start=1):
            row = _row(line, f"{self.path}:{number}", last=number == len(lines))
            if row is not None:
                rows.append(row)
        return rows


def cut_partial_line(path: Path) -> None:
    """Cut a last line that a kill or a full disk left without its end, so that the next
    line does not join it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        whole = f.read()
        f.truncate(whole.rfind(b"\n") + 1)
        f.flush()
        os.fsync(f.fileno())


def _row(line: str, where: str, last: bool) -> dict[str, Any] | None:
    """One line's block, checked against the schema; None for the cut-off rest of a block
    (it is measured again). A line that an older gate appended to a cut-off one is read
    from where it begins."""
    try:
        data = parse_json(line, where)
    except ConfigError as err:
        start = line.rfind(ROW_START)
        if start > 0:
            return _row(line[start:], where, last)
        if last:
            return None
        raise GateError(f"{where}: corrupt line ({err.reason})") from err
    return validate(data, "gate-block", where)


BLOCK_FIELDS = {f for f in Block.__dataclass_fields__}


def case_wall_s(rows: Sequence[dict[str, Any]], name: str) -> float:
    """Wall seconds a case's blocks took: what its budget (``case_wall_s``) counts."""
    return sum(r.get("wall_s", 0.0) for r in rows if r["case"] == name)


def case_data(cases: Sequence[GateCase], rows: Sequence[dict[str, Any]]) -> list[CaseData]:
    by_name = {c["name"]: CaseData(c["name"], c.get("env", ""), c.get("unit", "seconds"))
               for c in cases}
    for row in rows:
        if row["case"] in by_name:
            by_name[row["case"]].blocks.append(
                Block(**{k: v for k, v in row.items() if k in BLOCK_FIELDS}))
    return list(by_name.values())


def block_of(result: dict[str, Any], side: str, round_: int, confirm: bool,
             generation: int = 0) -> Block:
    m = result["measurement"]
    windows = m["windows"]
    limits = [w["power_limit_w"] for w in windows if w.get("power_limit_w")]
    return Block(side, round_, samples=list(result["samples"]),
                 clocks=[w.get("sm_clock_mhz_median") for w in windows],
                 power_w=[w.get("power_w_mean") for w in windows],
                 power_limit_w=min(limits) if limits else None,
                 throttle_bits=or_bits(w.get("throttle_bits_or") for w in windows),
                 backend=m["telemetry_backend"], confirm=confirm, generation=generation,
                 warmup_s=m.get("warmup_s"), at_cap=m.get("at_cap"),
                 reps_queued=list(m.get("reps_queued", [])),
                 input_set_medians_s=list(m.get("input_set_medians_s", [])),
                 rep_hold_s=m.get("rep_hold_s"), trials_retaken=m.get("trials_retaken"),
                 method=m.get("mode"), processes=(m.get("gpu_processes") or {}).get("others"))


def failed_block(side: str, round_: int, err: Exception, confirm: bool = False,
                 generation: int = 0) -> Block:
    status = "skipped" if isinstance(err, RemoteSkip | NotImplementedError) else "failed"
    return Block(side, round_, status, f"{type(err).__name__}: {err}", confirm=confirm,
                 generation=generation)


class Ledger:
    """What a gate run measured so far: ``blocks.jsonl``'s rows, appended as each block
    ends, and what they say: rounds done, a case's wall time and power, the verdicts.
    ``prepares.jsonl`` says what each preparation cost."""

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

    def record(self, case: GateCase, block: Block, lane: Lane) -> None:
        block.t = time.time()
        extra = {"lane": lane.label}
        self.blocks.append(case, block, extra)
        self.rows.append({"case": case["name"], "env": case.get("env", ""), **asdict(block),
                          **extra})

    def note_prepare(self, case: GateCase, side: str, generation: int, wall_s: float,
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
