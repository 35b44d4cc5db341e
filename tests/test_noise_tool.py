"""tools.lab.noise's sampler A/B: paired, equal-work measurements and their evaluation."""

from __future__ import annotations

import math
import time

from tests.fakes import FakeGpu, FakeKernel, ScriptedSource
from tools.lab import noise, noise_eval


def test_sampler_pairs_alternate_the_order_and_do_the_same_work():
    gpu = FakeGpu()
    kernel = FakeKernel(gpu, cycles=1.5e6)  # 1 ms at 1500 MHz
    t0 = time.perf_counter()
    source = ScriptedSource(gpu, host_to_device=lambda t: t - t0)
    rows: list[dict] = []
    noise.sampler_pairs([kernel], "gemm", 4, gpu, source, rows)
    assert [r["sampler"] for r in rows] == [True, False, False, True, True, False, False, True]
    assert [r["pair"] for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {r["period_s"] for r in rows if r["sampler"]} == {noise.SAMPLER_PERIOD_S}
    assert all(math.isclose(r["seconds"], 1e-3, rel_tol=1e-9) for r in rows)
    assert source.reads > 0  # the "on" arm really ran the sampler


def test_sampler_cost_is_the_paired_ratio_not_the_drift():
    rows = []
    for pair in range(60):
        level = 1.0 + 0.03 * math.sin(pair / 3)  # the GPU drifts by +-3% across pairs
        rows += [{"kernel": "gemm", "sampler": True, "pair": pair, "period_s": 0.05,
                  "seconds": level * 1.003},
                 {"kernel": "gemm", "sampler": False, "pair": pair, "period_s": 0.0,
                  "seconds": level}]
    cost = noise_eval.sampler_cost({"sampler_ab": rows})["gemm"]
    assert math.isclose(cost["delta"], 0.003, rel_tol=1e-6)
    # every pair carries the same ratio: the interval collapses onto it
    assert all(math.isclose(cost[k], 0.003, rel_tol=1e-6) for k in ("lo", "hi"))
    assert cost["pairs"] == 60 and cost["period_s"] == 0.05
    lines = noise_eval._sampler_lines({"sampler_ab": rows})
    assert any("| gemm | 50 ms | 60 | +0.300% |" in line for line in lines), lines
