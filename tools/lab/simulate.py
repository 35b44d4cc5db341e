"""The gate's error rates under its sequential design, by simulation on a CPU.

    python -m tools.lab.simulate --gates 400          # the table in docs/gate-evidence.md

Each simulated gate runs the real decision code (``look.decide_look`` at every look,
``sequential.replay`` at the end, confirmation by "fresh workers") on block medians
drawn from a noise model with the parts measured on an H200 on 2026-12-01
(docs/journal/2026-12-01.md):

- ``drift``: what moves both sides of a round together (the GPU's state): cancels;
- ``block``: each block's own scatter (a median of a few trials at a power cap);
- ``worker``: a fixed offset per worker process (where it placed its buffers), new at
  each restart, so the re-measure by fresh workers sees new offsets;
- heavy tails: Student-t with ``df`` degrees of freedom (a block hit by a hiccup).

It checks what optional stopping must not break: over the whole suite and all looks, a
run that changes nothing calls a false SLOW or FAST in at most ``alpha`` of runs.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kperf.gate.config import Thresholds
from kperf.gate.look import decide_look
from kperf.gate.model import Block, CaseData, Verdict
from kperf.gate.sequential import finalise, replay

REPO = Path(__file__).resolve().parent.parent.parent
COMPUTE = "bench_gemm.GemmTime.track_time('sim-{}', 'fp16', 'triton')"
BANDWIDTH = "bench_rmsnorm.RmsnormTime.track_time('sim-{}', 'bf16', 'triton')"
DECODE = "bench_gemm.GemmTime.track_time('sim-decode{}', 'fp16', 'triton')"
# The simulated cases are no op's cases: rules give them the classes of the cases they
# stand for (ahead of thresholds.json's own; an op's declared class never comes into it).
SIM_RULES = ((r"^bench_gemm\.\w+\.track_time\('sim-decode\d+'", "decode"),
             (r"^bench_gemm\.\w+\.track_time\('sim-\d+'", "compute"),
             (r"^bench_rmsnorm\.\w+\.track_time\('sim-\d+'", "bandwidth"))


def sim_thresholds(th: Thresholds) -> Thresholds:
    """``th`` with the simulated cases' rules first (``SIM_RULES``)."""
    import dataclasses
    import re

    from kperf.gate.config import Rule

    rules = tuple(Rule(re.compile(m), k) for m, k in SIM_RULES)
    if th.rules[:len(rules)] == rules:
        return th
    return dataclasses.replace(th, rules=(*rules, *th.rules))


@dataclass(frozen=True)
class Noise:
    block: float  # log-scale sd of a block's median
    drift: float = 0.0  # shared by both sides of a round
    worker: float = 0.0  # per worker process
    df: float | None = None  # Student-t tails; None: normal


# Fitted to the H200 on 2026-12-01 (docs/journal/2026-12-01.md): with 5 trials a block, the rounds'
# log ratios of power-capped GEMMs scattered 0.9-1.5% (a block ~0.8%), most of it the trials'
# own spread (1-2% within a block); a block at the cap now takes 15 trials
# (sequential.trials_at_cap), so 0.8% / sqrt(3), and the night's A/A measured the capped
# cases' rounds at 0.2-1.0% (sd), where this model gives 0.76%. Since a block at the cap
# is the mean of its trials (model.Block.level) they scatter 0.35-0.37% (pooled,
# docs/journal/2026-12-01.md "Before midnight"); the model keeps 0.76%, the worse case.
# Bandwidth-bound kernels with their buffers moved every block (sequential.placements): RMSNorm's
# blocks scattered 0.14% inside a worker and its workers sat 0.13% apart. The decode16 GEMMs
# (TileLang, Triton): in the gates' A/As their rounds, a new pair each, scattered 0.8-0.9%
# (pooled sd, disturbed rounds left out; docs/journal/2026-12-01.md "Late night"): 0.35% a block and
# 0.55% a worker give 0.92%. The bandwidth workers' 0.2%: in the gate's A/A of 2026-12-02
# (docs/journal/2026-12-02.md "Early afternoon") the 8 bandwidth cases' rounds, a new pair each,
# scattered 0.36% (pooled sd, 39 degrees of freedom); 0.15% a block and 0.12% a worker
# gave 0.27%, 0.2% a worker gives 0.35%. Decode since its copies come from an arena and its
# rounds are compared mode by mode (2026-12-04): 52 rounds of the two decode16 GEMMs in seven
# H200 gates scattered 0.39% (pooled sd, 38 degrees of freedom; docs/journal/2026-12-04.md);
# 0.15% a block and 0.25% a worker give 0.41%.
H200 = {"compute": Noise(block=0.0045, drift=0.02, worker=0.003, df=4.0),
        "bandwidth": Noise(block=0.0015, drift=0.002, worker=0.002, df=4.0),
        "decode": Noise(block=0.0015, drift=0.002, worker=0.0025, df=4.0)}


def _draw(rng: np.random.Generator, noise: Noise) -> float:
    if noise.df is None:
        return float(rng.normal(0.0, noise.block))
    # scaled so the sd stays ``block`` whatever the tails
    return float(rng.standard_t(noise.df) * noise.block * math.sqrt((noise.df - 2) / noise.df))


def _block(side: str, r: int, log_value: float, confirm: bool, generation: int) -> Block:
    return Block(side, r, samples=[math.exp(log_value)], clocks=[1400.0], power_w=[600.0],
                 power_limit_w=700.0, throttle_bits=0, backend="sim", confirm=confirm,
                 generation=generation)


def _offsets(rng: np.random.Generator, noises: Mapping[str, Noise]) -> dict[str, tuple]:
    return {n: (rng.normal(0, z.worker), rng.normal(0, z.worker)) for n, z in noises.items()}


def _round(cases: dict[str, CaseData], names: list[str], effects: Mapping[str, float],
           noises: Mapping[str, Noise], offsets: dict[str, tuple], r: int,
           rng: np.random.Generator, generation: int, confirm: bool = False) -> None:
    for name in names:
        noise = noises[name]
        drift = rng.normal(0.0, noise.drift)
        base = drift + offsets[name][0] + _draw(rng, noise)
        head = drift + offsets[name][1] + effects[name] + _draw(rng, noise)
        cases[name].blocks += [_block("base", r, base, confirm, generation),
                               _block("head", r, head, confirm, generation)]


def simulate_looks(effects: Mapping[str, float], noises: Mapping[str, Noise], th: Thresholds,
                   rng: np.random.Generator) -> tuple[dict[str, CaseData], dict[str, Verdict], int]:
    """The rounds and looks of one gate run, before any re-measure: the cases' blocks,
    the verdicts the looks decided, and the last pair of workers' generation."""
    th = sim_thresholds(th)
    seq = th.sequential
    cases = {name: CaseData(name) for name in effects}
    decided: dict[str, Verdict] = {}
    generation = -1
    for r in range(1, seq.max_rounds + 1):
        still = [n for n in effects if n not in decided]
        if not still:
            break
        if (r - 1) // seq.rounds_per_generation != generation:  # a fresh pair of workers
            generation = (r - 1) // seq.rounds_per_generation
            offsets = _offsets(rng, noises)
        _round(cases, still, effects, noises, offsets, r, rng, generation)
        if r >= seq.min_rounds:
            look = r - seq.min_rounds + 1
            for v in decide_look([cases[n] for n in still], th, r, look, seq.looks):
                if v.decided:
                    decided[v.case] = v
    return cases, decided, generation


def simulate_gate(effects: Mapping[str, float], noises: Mapping[str, Noise], th: Thresholds,
                  rng: np.random.Generator) -> list[Verdict]:
    """One gate run: ``effects`` are log ratios (true changes) per case name."""
    th = sim_thresholds(th)
    seq = th.sequential
    cases, _, generation = simulate_looks(effects, noises, th, rng)
    waiting = [v.case for v in replay(list(cases.values()), th) if v.candidate]
    fresh = _offsets(rng, noises)  # the re-measure runs in new worker processes
    last = max(b.round for c in cases.values() for b in c.blocks)
    for k in range(seq.confirm_rounds):
        _round(cases, waiting, effects, noises, fresh, last + 1 + k, rng, generation + 1,
               confirm=True)
    return finalise(replay(list(cases.values()), th), "rounds or budget spent")


def flag_rate(gates: int, effects: Mapping[str, float], noises: Mapping[str, Noise],
              th: Thresholds, seed: int = 0) -> float:
    """The share of gate runs in which the looks alone (before the re-measure) flagged an
    unchanged case SLOW or FAST: what the spending of alpha over looks and the correction
    over cases hold below alpha."""
    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(gates):
        _, decided, _ = simulate_looks(effects, noises, th, rng)
        flagged += any(v.verdict in ("SLOW", "FAST") and not effects[v.case]
                       for v in decided.values())
    return flagged / gates


def suite(compute: int, bandwidth: int, compute_effect: float = 0.0,
          bandwidth_effect: float = 0.0, changed: int = 1, decode: int = 0,
          noise: Mapping[str, Noise] | None = None, decode_effect: float = 0.0,
          ) -> tuple[dict[str, float], dict[str, Noise]]:
    """A suite like the PR subset: ``changed`` cases of each class carry its effect.
    ``noise``: per class (default H200)."""
    noise = H200 if noise is None else noise
    effects, noises = {}, {}
    for i in range(compute):
        effects[COMPUTE.format(i)] = math.log1p(compute_effect) if i < changed else 0.0
        noises[COMPUTE.format(i)] = noise["compute"]
    for i in range(bandwidth):
        effects[BANDWIDTH.format(i)] = math.log1p(bandwidth_effect) if i < changed else 0.0
        noises[BANDWIDTH.format(i)] = noise["bandwidth"]
    for i in range(decode):
        effects[DECODE.format(i)] = math.log1p(decode_effect) if i < changed else 0.0
        noises[DECODE.format(i)] = noise["decode"]
    return effects, noises


def rates(gates: int, effects: Mapping[str, float], noises: Mapping[str, Noise],
          th: Thresholds, seed: int = 0) -> dict[str, float]:
    """Shares over gate runs: any false SLOW/FAST in a run; per class, changed cases SLOW
    and unchanged cases SAME."""
    rng = np.random.default_rng(seed)
    counts: dict[str, list[int]] = {}
    false_alarm, rounds = 0, []

    def tally(key: str, hit: bool) -> None:
        counts.setdefault(key, [0, 0])
        counts[key][0] += hit
        counts[key][1] += 1

    for _ in range(gates):
        verdicts = simulate_gate(effects, noises, th, rng)
        false_alarm += any(v.verdict in ("SLOW", "FAST") and not effects[v.case]
                           for v in verdicts)
        for v in verdicts:
            klass = sim_thresholds(th).rule_for(v.case)[1].name
            if effects[v.case]:
                tally(f"slow_{klass}", v.verdict == "SLOW")
            else:
                tally(f"same_{klass}", v.verdict == "SAME")
        rounds.append(max(v.rounds for v in verdicts))
    out = {k: hit / n for k, (hit, n) in counts.items()}
    out.update(false_alarm=false_alarm / gates, median_rounds=float(np.median(rounds)))
    out["same"] = (sum(counts[k][0] for k in counts if k.startswith("same_"))
                   / max(1, sum(counts[k][1] for k in counts if k.startswith("same_"))))
    out["slow"] = (sum(counts[k][0] for k in counts if k.startswith("slow_"))
                   / max(1, sum(counts[k][1] for k in counts if k.startswith("slow_"))))
    return out


def with_settings(path: Path, settings: list[str]) -> Thresholds:
    """The thresholds of ``path`` with each ``a.b.c=value`` (a JSON value) replaced."""
    raw = json.loads(path.read_text())
    for setting in settings:
        key, sep, value = setting.partition("=")
        *parents, leaf = key.split(".")
        node = raw
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not sep or not isinstance(node, dict) or leaf not in node:
            raise SystemExit(f"--set {setting!r}: no key {key!r} in {path}")
        node[leaf] = json.loads(value)
    return sim_thresholds(Thresholds.from_dict(raw, path))


def bandwidth_table(gates: int, th: Thresholds) -> None:
    """8 bandwidth cases alone: how often unchanged ones are SAME and changed ones SLOW."""
    print("| suite (8 bandwidth cases) | unchanged SAME | changed SLOW | false SLOW/FAST | "
          "rounds (median) |\n|---|---|---|---|---|")
    for label, effect in (("A/A", 0.0), ("+1% on 1", 0.01), ("+0.75% on 1", 0.0075)):
        r = rates(gates, *suite(0, 8, bandwidth_effect=effect), th)
        slow = f"{r['slow_bandwidth']:.0%}" if effect else "—"
        print(f"| {label} | {r['same_bandwidth']:.0%} | {slow} | {r['false_alarm']:.1%} | "
              f"{r['median_rounds']:.0f} |")


def decode_table(gates: int, th: Thresholds) -> None:
    """The PR subset's 2 decode cases alone: unchanged SAME, changed SLOW."""
    print("| suite (2 decode cases) | unchanged SAME | changed SLOW | false SLOW/FAST | "
          "rounds (median) |\n|---|---|---|---|---|")
    for label, effect in (("A/A", 0.0), ("+2% on 1", 0.02), ("+1.5% on 1", 0.015),
                          ("+1% on 1", 0.01)):
        r = rates(gates, *suite(0, 0, decode=2, decode_effect=effect), th)
        slow = f"{r['slow_decode']:.0%}" if effect else "—"
        print(f"| {label} | {r['same_decode']:.0%} | {slow} | {r['false_alarm']:.1%} | "
              f"{r['median_rounds']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lab.simulate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=400)
    parser.add_argument("--thresholds", type=Path,
                        default=REPO / "kperf" / "defaults" / "thresholds.json")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="replace one threshold, e.g. classes.bandwidth.min_ratio=0.0075 "
                        "or sequential.max_rounds=10 (repeatable)")
    parser.add_argument("--bandwidth", action="store_true",
                        help="8 bandwidth cases alone (docs/gate.md, the bandwidth class)")
    parser.add_argument("--decode", action="store_true",
                        help="2 decode cases alone (docs/gate-evidence.md, the decode class)")
    args = parser.parse_args(argv)
    th = with_settings(args.thresholds, args.set)
    if args.bandwidth:
        bandwidth_table(args.gates, th)
        return 0
    if args.decode:
        decode_table(args.gates, th)
        return 0
    print("| suite (6 compute, 8 bandwidth, 2 decode cases: the PR subset) | runs with any "
          "false SLOW/FAST | unchanged SAME: compute / bandwidth / decode | +3% compute SLOW | "
          "+1% bandwidth SLOW | rounds (median) |\n|---|---|---|---|---|---|")
    changed = suite(6, 8, 0.03, 0.01, decode=2)
    for label, effects in (("A/A", suite(6, 8, decode=2)),
                           ("+3% on 1 compute and +1% on 1 bandwidth case", changed)):
        r = rates(args.gates, *effects, th)
        found = [f"{r[k]:.0%}" if k in r else "—" for k in ("slow_compute", "slow_bandwidth")]
        print(f"| {label} | {r['false_alarm']:.1%} | {r['same_compute']:.0%} / "
              f"{r['same_bandwidth']:.0%} / {r['same_decode']:.0%} | {found[0]} | "
              f"{found[1]} | {r['median_rounds']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
