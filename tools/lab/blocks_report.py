"""What a tools.lab.blocks experiment says, arm by arm (the slots with the same settings).

    python -m tools.lab.blocks_report out/blocks          # every <experiment>.json there

A block's level is its placed copies' mean where it has copies, else its trials' median.
Per arm: blocks, how many had their reps held (``rep_hold_s`` > 0 where recorded, else a
board under ``HELD_POWER_SHARE`` of the experiment's highest block power: held RMSNorm
blocks drew 220-300 W where the others drew 470-530 W on H200 GPU-38de9528, 2026-12-04), the
board's mean power, how many had a trial that ended with the host behind (fewer than
``Plan.host_ahead_reps`` reps queued: its intervals may hold launch latency), the calls in
a graph replay (where the blocks were graph-replayed: the graph is sized from each block's
estimate), the level, and four spreads (sd over the mean): of a worker's blocks (pooled over
the arm's workers), of the workers' means (what two asv runs of one commit differ by: each
run is one worker), of all the arm's blocks, and within a round (the arm's blocks less their
round's mean).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from kperf.core.plan import Plan
from kperf.gate.model import Block

HELD_POWER_SHARE = 0.65


def _as_block(block: dict[str, Any]) -> Block:
    """A lab block as the gate's model sees one (its level and power as the gate takes
    them)."""
    return Block("base", block["round"], samples=list(block["samples"]),
                 power_w=[w.get("power_w_mean") for w in block.get("windows", [])],
                 input_set_medians_s=list(block.get("input_set_medians_s") or []))


def level_s(block: dict[str, Any]) -> float:
    """The placed copies' mean where the block has copies, else its trials' median."""
    return _as_block(block).level(by_placement=True)


def mean_power_w(block: dict[str, Any]) -> float | None:
    return _as_block(block).power()


def _pooled_sd(groups: list[list[float]]) -> float | None:
    """sd of log levels about each group's own mean, pooled (None: no degree of freedom)."""
    squares = df = 0.0
    for values in groups:
        logs = [math.log(v) for v in values]
        if len(logs) > 1:
            mean = statistics.fmean(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return math.sqrt(squares / df) if df else None


def arms(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The measured blocks of each arm, an arm named by its slot's settings (a failed
    slot's are left out: ``failures``; so are a slot's ``before`` cases, round -1, which
    are other cases)."""
    names = [json.dumps(slot, sort_keys=True) for slot in data["slots"]]
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for block in data["blocks"]:
        if "error" not in block and block.get("round", 0) >= 0:
            out[names[block["slot"]]].append(block)
    return dict(out)


def failures(data: dict[str, Any]) -> list[str]:
    """'slot N (its settings): what failed' for each slot that failed."""
    return [f"slot {slot} (`{json.dumps(data['slots'][int(slot)], sort_keys=True)}`): {why}"
            for slot, why in sorted((data.get("failed_slots") or {}).items(),
                                    key=lambda kv: int(kv[0]))]


def held(blocks: list[dict[str, Any]], top_w: float | None) -> list[bool]:
    """Whether each block's reps were held; ``top_w``: the experiment's highest block
    power, for records from before ``rep_hold_s`` was kept."""
    if all(b.get("rep_hold_s") is not None for b in blocks):
        return [b["rep_hold_s"] > 0 for b in blocks]
    powers = [mean_power_w(b) for b in blocks]
    return [p is not None and top_w is not None and p < HELD_POWER_SHARE * top_w
            for p in powers]


def host_behind(block: dict[str, Any]) -> bool:
    """A trial of the block ended with the host behind the GPU (kperf/core/reps.py)."""
    return any(q is not None and q < Plan.host_ahead_reps
               for q in block.get("reps_queued") or [])


def arm_row(blocks: list[dict[str, Any]], top_w: float | None = None) -> dict[str, Any]:
    levels = [level_s(b) for b in blocks]
    by_slot: dict[int, list[float]] = defaultdict(list)
    by_round: dict[int, list[float]] = defaultdict(list)
    for block, level in zip(blocks, levels, strict=True):
        by_slot[block["slot"]].append(level)
        by_round[block["round"]].append(level)
    powers = [p for p in map(mean_power_w, blocks) if p is not None]
    graph_calls = [b["calls_per_rep"] for b in blocks if b.get("mode") == "graph"]
    worker_means = [math.exp(statistics.fmean(map(math.log, v))) for v in by_slot.values()]
    return {"blocks": len(blocks), "held": sum(held(blocks, top_w)),
            "host_behind": sum(map(host_behind, blocks)),
            "power_w": statistics.fmean(powers) if powers else None,
            "graph_calls": (min(graph_calls), max(graph_calls)) if graph_calls else None,
            "level_us": statistics.fmean(levels) * 1e6,
            "worker_sd": _pooled_sd(list(by_slot.values())),
            "between_workers_sd": _pooled_sd([worker_means]),
            "all_sd": _pooled_sd([levels]),
            "round_sd": _pooled_sd(list(by_round.values()))}


def report(data: dict[str, Any], name: str) -> str:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{x:.2%}"

    lines = [f"### {name}", "",
             "| arm | blocks | held | host behind | board W | graph calls | level us "
             "| a worker's sd | between workers | all sd | within a round |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    measured = arms(data)
    top_w = max((p for blocks in measured.values() for p in map(mean_power_w, blocks)
                 if p is not None), default=None)
    for arm, blocks in measured.items():
        r = arm_row(blocks, top_w)
        watts = "—" if r["power_w"] is None else f"{r['power_w']:.0f}"
        calls = "—" if r["graph_calls"] is None else "{}-{}".format(*r["graph_calls"])
        lines.append(f"| `{arm}` | {r['blocks']} | {r['held']} | {r['host_behind']} | {watts} | "
                     f"{calls} | {r['level_us']:.2f} | {pct(r['worker_sd'])} | "
                     f"{pct(r['between_workers_sd'])} | {pct(r['all_sd'])} | "
                     f"{pct(r['round_sd'])} |")
    lines += [f"\nFailed: {failure}" for failure in failures(data)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab.blocks_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a blocks JSON or a folder of them")
    args = parser.parse_args(argv)
    files = sorted(args.path.glob("*.json")) if args.path.is_dir() else [args.path]
    if not files:
        parser.error(f"{args.path}: no blocks JSON there")
    for path in files:
        try:
            data = json.loads(path.read_text())
            print(report(data, path.stem), end="\n\n")
        except (OSError, json.JSONDecodeError, KeyError, TypeError, IndexError) as err:
            print(f"{path}: not a tools.lab.blocks result ({type(err).__name__}: {err})",
                  file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
