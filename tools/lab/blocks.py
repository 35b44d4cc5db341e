"""Where the noise of a GPU measurement lives: blocks, workers and code, on this GPU.

    python -m tools.lab.blocks --spec '{"op": "gemm", "case": "square-8192", "dtype": "fp16",
        "backend": "triton"}' --slots '[{}, {}, {"GROUP_M": 1}]' --rounds 8 --out b.json

Each slot is its own measurement worker (a process with its own GPU context, inputs and
compiled kernel) timing the same case, with that slot's configuration overrides. A round
measures one block per slot (warm-up until settled, then ``--trials`` trials), the slots'
order rotating from round to round. A slot's ``before`` (a list of case specs) is measured
once by its worker, in order, before the rounds (round -1): what a history's worker
measured before a case. Identical slots are an A/A: the spread of block
medians inside a worker, between workers and between rounds says what a gate's replicate
must be. A slot's ``plan`` key changes that slot's measurement plan, e.g.
``{"plan": {"placements": 4}}``: inputs copied to 4 new places in memory for every block.
A slot with an edited configuration shows what the edit does to time, clock,
power and energy per call at the same moment (a power-capped kernel: whether its clock
follows the code). Also ``--energy-probe``: how often the energy counter moves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any


def block_summary(result: dict[str, Any]) -> dict[str, Any]:
    """What the gate uses of a block: samples and the telemetry of each trial."""
    m = result["measurement"]
    return {"samples": result["samples"], "number": result["number"],
            "warmup_s": m["warmup_s"], "warmup_trials": m["warmup_trials"],
            "settled": m["settled"], "windows": m["windows"], "pid": result["pid"],
            "reps_queued": m.get("reps_queued", []),
            "input_set_medians_s": m.get("input_set_medians_s", []),
            "rep_hold_s": m.get("rep_hold_s"), "host_rep_s": m.get("host_rep_s"),
            "warmup_cool": m.get("warmup_cool"), "mode": m.get("mode"),
            "calls_per_rep": m.get("calls_per_rep"), "estimate_s": m.get("estimate_s"),
            "energy_per_call_j": result["energy_per_call_j"], "t": result["measured_at"]}


def run(spec: dict[str, Any], slots: list[dict[str, Any]], rounds: int,
        plan: dict[str, Any]) -> dict[str, Any]:
    import os

    from kperf.gate.workers import gate_worker

    suite = Path(__file__).resolve().parents[2] / "benchmarks" / "__init__.py"
    workers = [gate_worker(f"blocks-{i}", sys.path, f"slot {i}", dict(os.environ), suite)
               for i in range(len(slots))]
    overrides = [{k: v for k, v in slot.items() if k not in ("plan", "before")}
                 for slot in slots]
    specs = [dict(spec, overrides=o) if o else spec for o in overrides]
    plans = [{**plan, **slot.get("plan", {})} for slot in slots]
    start = time.time()
    failed: dict[int, str] = {}  # slot -> its failure: the slot's, not the experiment's
    for i, (worker, s) in enumerate(zip(workers, specs, strict=True)):
        _ask(worker, {"op": "prepare", "spec": s}, 600, i, failed)
    prepared_s = time.time() - start
    blocks = []
    for i, (worker, slot) in enumerate(zip(workers, slots, strict=True)):
        for before in slot.get("before", []):  # what the worker measures first, in order
            result = _ask(worker, {"op": "measure", "spec": before, "plan": plans[i]}, 300,
                          i, failed)
            blocks.append({"round": -1, "slot": i, "spec": before,
                           **(block_summary(result) if result else {"error": failed[i]})})
            if i in failed:
                break
    for r in range(rounds):
        order = [(r + i) % len(slots) for i in range(len(slots))]
        for i in order:
            if i in failed:
                continue
            result = _ask(workers[i], {"op": "measure", "spec": specs[i], "plan": plans[i]},
                          300, i, failed)
            blocks.append({"round": r, "slot": i, **(block_summary(result) if result else
                                                     {"error": failed[i]})})
    for worker in workers:
        worker.shutdown()
    return {"spec": spec, "slots": slots, "plan": plan, "prepare_s": prepared_s,
            "wall_s": time.time() - start, "blocks": blocks, "failed_slots": failed}


def _ask(worker: Any, message: dict[str, Any], timeout_s: float, slot: int,
         failed: dict[int, str]) -> dict[str, Any] | None:
    """The worker's answer, or None with the slot's failure noted (a crash, a hang, a
    wrong result or a skip: the other slots go on)."""
    try:
        return worker.request(message, timeout_s)
    except (RuntimeError, NotImplementedError, OSError) as err:
        failed[slot] = f"{message['op']}: {type(err).__name__}: {str(err)[:500]}"
        print(f"slot {slot} failed ({failed[slot]})", file=sys.stderr, flush=True)
        return None


def energy_probe(seconds: float = 1.0) -> dict[str, Any]:
    """Poll NVML's energy counter and power every millisecond under a GEMM load."""
    import pynvml
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    for _ in range(50):
        torch.matmul(a, a)
    rows = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        torch.matmul(a, a)
        rows.append((time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
                     pynvml.nvmlDeviceGetPowerUsage(handle)))
    torch.cuda.synchronize()
    changes = [i for i in range(1, len(rows)) if rows[i][1] != rows[i - 1][1]]
    gaps = [rows[j][0] - rows[i][0] for i, j in itertools.pairwise(changes)]
    return {"polls": len(rows), "energy_changes": len(changes),
            "median_update_s": sorted(gaps)[len(gaps) // 2] if gaps else None,
            "rows": rows[:: max(1, len(rows) // 400)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab.blocks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--spec", help="case spec JSON (op, case, dtype, backend)")
    parser.add_argument("--slots", default="[{}, {}, {}]", help="JSON list of overrides")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--plan", default='{"trials": 5, "energy_s": 0}')
    parser.add_argument("--energy-probe", action="store_true")
    parser.add_argument("--file", type=Path, help="experiments: {experiments: [{name, spec, "
                        "slots, rounds}]}; --out is then a folder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.file:
        args.out.mkdir(parents=True, exist_ok=True)
        for exp in json.loads(args.file.read_text())["experiments"]:
            data = run(exp["spec"], exp["slots"], exp["rounds"], json.loads(args.plan))
            (args.out / f"{exp['name']}.json").write_text(json.dumps(data))
            print(f"{exp['name']}: {data['wall_s']:.0f} s, {len(data['failed_slots'])} of "
                  f"{len(exp['slots'])} slots failed", flush=True)
        return 0
    if args.energy_probe:
        data = energy_probe()
    else:
        data = run(json.loads(args.spec), json.loads(args.slots), args.rounds,
                   json.loads(args.plan))
    args.out.write_text(json.dumps(data))
    print(f"{args.out}: {data.get('wall_s', 0):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
