"""What the gate's tests share: two real case names, blocks and cases of known truth, and
fake workers that answer the measuring run (kperf/gate/measure.py), run to its end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from kperf.gate import cli
from kperf.gate.measure import Run
from kperf.gate.model import Block, CaseData, Verdict
from kperf.gate.plan import Lane

GEMM = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'triton')"
NORM = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"


def block(side: str, r: int, t: float, clock: float | None = 1420.0, power: float = 690.0,
          limit: float = 700.0, bits: int | None = 0x4, confirm: bool = False,
          spread: float = 0.0, generation: int | None = None) -> Block:
    """One block; by default each round is its own pair of workers, as the gate runs."""
    samples = [t * (1 + spread * k) for k in (-2, -1, 0, 1, 2)]
    return Block(side, r, samples=samples, clocks=[clock] * 5, power_w=[power] * 5,
                 power_limit_w=limit, throttle_bits=bits, backend="nvml", confirm=confirm,
                 generation=r if generation is None else generation)


def case(name: str, base: list[float], head: list[float], **kw) -> CaseData:
    """Rounds of one block a side; ``kw`` values may be per-side pairs or per-round lists."""
    data = CaseData(name)
    for r, (b, h) in enumerate(zip(base, head, strict=True), start=1):
        per = {k: (v[r - 1] if isinstance(v, list) else v) for k, v in kw.items()}
        pb = {k: (v[0] if isinstance(v, tuple) else v) for k, v in per.items()}
        ph = {k: (v[1] if isinstance(v, tuple) else v) for k, v in per.items()}
        data.blocks += [block("base", r, b, **pb), block("head", r, h, **ph)]
    return data


def noisy(level: float, n: int, sd: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(level * math.exp(sd * x)) for x in rng.standard_normal(n)]


def one(verdicts: list[Verdict], name: str) -> Verdict:
    return next(v for v in verdicts if v.case == name)


class FakeClient:
    """Answers measure requests; records the order of sides per case and round."""

    def __init__(self, side: str, log: list) -> None:
        self.side, self.log = side, log
        self.plans: list[dict] = []

    def shutdown(self) -> None:
        pass

    def request(self, message: dict, timeout_s: float) -> dict:
        self.log.append((message["spec"]["case"], self.side))
        self.plans.append(message.get("plan"))
        windows = [{"sm_clock_mhz_median": 1420.0, "power_w_mean": 690.0,
                    "power_limit_w": 700.0, "throttle_bits_or": 4}] * 5
        return {"samples": [1.0] * 5, "measurement": {"windows": windows,
                                                      "telemetry_backend": "nvml"}}


class OpLog(FakeClient):
    """A fake worker that also says which request reached which pair, and when it stopped."""

    def __init__(self, slot: str, events: list) -> None:
        super().__init__("base" if "-base-" in slot else "head", [])
        self.slot, self.events, self.batches = slot, events, []

    def shutdown(self) -> None:
        self.events.append((self.slot, "shutdown"))

    def request(self, message: dict, timeout_s: float) -> dict:
        self.events.append((self.slot, message["op"]))
        if message["op"] == "prepare":
            self.batches.append(message.get("batch"))
        if message["op"] == "warm":
            assert all("case" in spec for spec in message["specs"])  # what it will measure
            return {"seconds": 0.0, "missing": []}
        if message["op"] == "static":
            return {"figures": {"registers": 64.0}, "artifacts": ["cubin"]}
        return super().request(message, timeout_s)


def _run_to_the_end(tmp_path: Path, th, cases: list[dict], make_client,
                    log=lambda s: None) -> Run:
    """A gate run over ``cases`` (one lane) with fake workers, measured until it stops;
    its workers retired at the end, as kperf/gate/cli.py does."""
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=[c["name"] for c in cases])])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=log)
    try:
        run.run()
    finally:
        run.retire_workers()
    return run
