"""Measure the noise floor and a known slowdown on this GPU, for judging the gate.

    python -m tools.lab.noise collect --out noise.json     # on the GPU
    python -m tools.lab.noise evaluate noise.json           # anywhere: gate statistics offline

``collect`` times, in interleaved rounds, a compute-bound kernel (torch.matmul 8192^3
fp16, power-capped on an H200) and a bandwidth-bound kernel (1 GiB copy), each as the
base and as variants with a known amount of extra work (K or the byte count grown by
1, 3 and 5 %). Each trial is one asv-style sample (median of event-timed reps with an
L2 flush) with its NVML clock window. It also times the same kernels with and without
the telemetry sampler, to measure the sampler's cost: adjacent pairs (AB, then BA) of
identical measurements that differ only in the sampler thread, so that the ratio inside
a pair carries the sampler's effect and not the GPU's drift.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from kperf.core.timing import Plan

SLOWDOWNS = (0.0, 0.01, 0.03, 0.05)
SAMPLER_PERIOD_S = 0.05  # the measurement core's default
# one warm-up trial and one timed trial: the same work whether or not a sampler runs
TRIAL_PLAN = dict(trials=1, min_trial_s=0.1, warmup_min_s=0.0, settle_trials=1)


def _kernels(kind: str, slowdown: float):
    import torch

    if kind == "gemm":
        k = round(8192 * (1 + slowdown) / 64) * 64
        sets = [(torch.randn(8192, k, device="cuda", dtype=torch.float16),
                 torch.randn(k, 8192, device="cuda", dtype=torch.float16)) for _ in range(2)]
        return [lambda a=a, b=b: torch.matmul(a, b) for a, b in sets], 2.0 * 8192 * 8192 * k
    n = int((1 << 28) * (1 + slowdown))  # fp32 elements: 1 GiB at the base size
    src, dst = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    return [lambda: dst.copy_(src)], 8.0 * n


def sampler_pairs(calls, kind: str, pairs: int, device, source, rows: list[dict]) -> None:
    """``pairs`` adjacent measurements with and without the sampler, order alternating."""
    from kperf.core.telemetry import NullSource
    from kperf.core.timing import measure

    off = NullSource("A/B without sampler")
    for pair in range(pairs):
        for on in (True, False) if pair % 2 == 0 else (False, True):
            m = measure(calls, device, Plan(**TRIAL_PLAN), source if on else off,
                        sampler_period_s=SAMPLER_PERIOD_S)
            if not on and source.lag_s:  # measure() waits out the lag with a sampler: same idle
                time.sleep(min(source.lag_s * 2, 0.2))
            rows.append({"kernel": kind, "sampler": on, "pair": pair,
                         "period_s": SAMPLER_PERIOD_S if on else 0.0,
                         "seconds": m.samples[0]})


def collect(rounds: int, out: Path, kinds: tuple[str, ...] = ("gemm", "copy"),
            sampler_only: bool = False, pairs_per_kernel: int | None = None) -> dict[str, Any]:
    from kperf.core.device import TorchDevice
    from kperf.core.telemetry import open_source
    from kperf.core.timing import measure

    pairs_per_kernel = rounds if pairs_per_kernel is None else pairs_per_kernel
    device = TorchDevice(flush_bytes=100 << 20)
    source = open_source()
    data: dict[str, Any] = {"gpu": device.name, "telemetry": source.backend,
                            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "trials": [], "sampler_ab": []}
    start = time.time()
    for kind in kinds:
        variants = {s: _kernels(kind, s)[0] for s in SLOWDOWNS}
        measure(variants[0.0], device, Plan(trials=1, warmup_min_s=2.0), source)  # settle
        for r in range(0 if sampler_only else rounds):
            order = SLOWDOWNS if r % 2 == 0 else tuple(reversed(SLOWDOWNS))
            for s in order:
                m = measure(variants[s], device, Plan(**TRIAL_PLAN), source)
                w = m.windows[0]
                data["trials"].append({"kernel": kind, "slowdown": s, "round": r,
                                       "seconds": m.samples[0], "reps": m.reps,
                                       "sm_clock_mhz": w.sm_clock_mhz_median,
                                       "sm_clock_mhz_mean": w.sm_clock_mhz_mean,
                                       "throttle_bits": w.throttle_bits_or,
                                       "power_w": w.power_w_mean})
        sampler_pairs(variants[0.0], kind, pairs_per_kernel, device, source, data["sampler_ab"])
        del variants
    data["wall_s"] = time.time() - start
    out.write_text(json.dumps(data, indent=1))
    source.close()
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--rounds", type=int, default=24)
    c.add_argument("--out", type=Path, default=Path("noise.json"))
    c.add_argument("--kinds", default="gemm,copy")
    c.add_argument("--sampler-only", action="store_true", help="only the sampler A/B")
    c.add_argument("--sampler-pairs", type=int, help="sampler A/B pairs per kernel "
                   "(default: --rounds)")
    e = sub.add_parser("evaluate")
    e.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "collect":
        data = collect(args.rounds, args.out, tuple(args.kinds.split(",")), args.sampler_only,
                       args.sampler_pairs)
        print(f"{len(data['trials'])} trials in {data['wall_s']:.0f} s -> {args.out}")
        return 0
    from tools.lab.noise_eval import report

    print(report(json.loads(args.path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
