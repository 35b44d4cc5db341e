"""The class settings chosen on 2026-12-03: the bandwidth class's SAME band wider than the
smallest change it reports (``same_ratio``), and the decode class's block figure taken
over placed copies (``level_by_placement``). Each test fails when its rule is removed."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from kperf.config import ConfigError
from kperf.core.stats import Comparison, label
from kperf.core.timing import Plan, measure
from kperf.gate.config import Thresholds
from kperf.gate.look import decide_look
from kperf.gate.model import Block, CaseData
from kperf.gate.sequential import replay
from kperf.project import DEFAULTS

from .conftest import synthetic_thresholds
from .fakes import FakeGpu, FakeKernel

REPO = Path(__file__).resolve().parent.parent
NORM = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"
DECODE = ("bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', "
          "'tilelang')")


@pytest.fixture(scope="module")
def th() -> Thresholds:
    return synthetic_thresholds()


def _comparison(ratio: float, low: float, high: float) -> Comparison:
    return Comparison(8, ratio, low, high, 0.5, 0.003)


def test_same_needs_the_interval_inside_same_ratio_and_slow_only_min_ratio() -> None:
    inside_wide = _comparison(1.002, 0.996, 1.007)  # inside 0.75%, not inside 0.5%
    assert label(inside_wide, inside_wide, 0.5, 0.01, 0.005) == "NOISY"
    assert label(inside_wide, inside_wide, 0.5, 0.01, 0.005, 0.0075) == "SAME"
    six_tenths = _comparison(1.006, 1.004, 1.008)  # significant, past 0.5%, inside 0.75%'s
    assert label(six_tenths, six_tenths, 0.001, 0.01, 0.005, 0.0075) == "SLOW"
    assert label(six_tenths, six_tenths, 0.001, 0.01, 0.0075) == "NOISY"


def _rounds(name: str, ratios: list[float]) -> CaseData:
    data = CaseData(name)
    for r, ratio in enumerate(ratios, start=1):
        for side, t in (("base", 70e-6), ("head", 70e-6 * ratio)):
            data.blocks.append(Block(side, r, samples=[t] * 5, clocks=[1980.0] * 5,
                                     power_w=[550.0] * 5, power_limit_w=700.0,
                                     throttle_bits=0, backend="nvml", generation=r))
    return data


def test_an_unchanged_bandwidth_case_whose_pairs_sit_a_quarter_percent_off_is_same(th) -> None:
    """RMSNorm Triton's rounds in the A/A of 2026-12-02 (H200, docs/journal/2026-12-02.md "Early
    afternoon"): same code, a mean 0.25% off 1, sd 0.31%. At the 0.5% band the interval
    [0.999, 1.006] never fit; the class's 0.75% band takes it."""
    ratios = [1 + p / 100 for p in (0.14, 0.32, -0.18, 0.05, 0.41, 0.82, 0.18)]
    looks = th.sequential.looks
    v = decide_look([_rounds(NORM, ratios)], th, None, looks, looks)[0]
    assert th.classes["bandwidth"].same_ratio == 0.0075
    assert v.verdict == "SAME", v
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    del raw["classes"]["bandwidth"]["same_ratio"]
    narrow = Thresholds.from_dict(raw, DEFAULTS / "thresholds.json")
    assert decide_look([_rounds(NORM, ratios)], narrow, None, looks, looks)[0].verdict \
        == "INCONCLUSIVE"


def test_a_same_band_narrower_than_the_smallest_change_is_refused(tmp_path: Path) -> None:
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    raw["classes"]["bandwidth"]["same_ratio"] = 0.004
    path = tmp_path / "t.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="/classes/bandwidth/same_ratio"):
        Thresholds.load(path)


# --------------------------------------------------------------------------- placement

# the decode16 TileLang GEMM by placement (H200, docs/journal/2026-12-02.md)
LEVELS_US = (88.0, 101.0)


def _placed_block(gpu: FakeGpu, side: str, r: int, levels_us: list[float],
                  confirm: bool) -> Block:
    """A block measured on the simulated GPU: four placed copies, each at its level; the
    calls cycle over them, a trial is the median of its calls."""
    copies = [FakeKernel(gpu, cycles=1500e6 * us * 1e-6) for us in levels_us]
    m = measure(copies, gpu, Plan(min_trial_s=0.0009, min_reps=9, max_reps=9, trials=5,
                                  warmup_min_s=0.0, warmup_max_s=0.0, energy_s=0))
    return Block(side, r, samples=m.samples, clocks=[1980.0] * 5, power_w=[500.0] * 5,
                 power_limit_w=700.0, throttle_bits=0, backend="nvml", generation=r,
                 confirm=confirm, input_set_medians_s=m.input_set_medians_s)


def _two_level_rounds(data: CaseData, head_factor: float, rounds: range, seed: int,
                      confirm: bool = False) -> CaseData:
    """Each block places two copies at each level, in a new order: with 9 calls a trial,
    which level gets the fifth call decides a trial's median. Each round a new pair."""
    rng, gpu = np.random.default_rng(seed), FakeGpu()
    for r in rounds:
        for side, factor in (("base", 1.0), ("head", head_factor)):
            levels = [us * factor for us in rng.permutation([*LEVELS_US, *LEVELS_US])]
            data.blocks.append(_placed_block(gpu, side, r, levels, confirm))
    return data


def test_a_two_level_kernel_is_same_by_its_copies_and_not_by_its_trials(th) -> None:
    data = _two_level_rounds(CaseData(DECODE), 1.0, range(1, 5), seed=3)
    ratios = [h.level() / b.level() for b, h in data.pairs()]
    assert max(abs(math.log(x)) for x in ratios) > 0.1  # the trials' medians jump levels
    for b in data.blocks:
        assert b.level(by_placement=True) == pytest.approx(statistics.fmean(LEVELS_US) * 1e-6)
    assert th.classes["decode"].level_by_placement
    assert replay([data], th)[0].verdict == "SAME"
    raw = json.loads((DEFAULTS / "thresholds.json").read_text())
    raw["classes"]["decode"]["level_by_placement"] = False
    by_trials = Thresholds.from_dict(raw, DEFAULTS / "thresholds.json")
    assert replay([data], by_trials)[0].verdict != "SAME"


def test_a_change_in_every_copy_of_a_two_level_kernel_is_slow(th) -> None:
    data = _two_level_rounds(CaseData(DECODE), 1.03, range(1, 5), seed=5)
    v = replay([data], th)[0]
    assert v.candidate == "SLOW" and v.ratio == pytest.approx(1.03, rel=1e-3), v
    _two_level_rounds(data, 1.03, range(5, 7), seed=6, confirm=True)  # fresh workers
    v = replay([data], th)[0]
    assert (v.verdict, v.confirmed) == ("SLOW", True), v


def test_a_block_without_copies_keeps_its_trials_figure() -> None:
    trials = [1.0, 1.2, 1.1]
    assert Block("base", 1, samples=trials).level(by_placement=True) == 1.1
    one_copy = Block("base", 1, samples=trials, input_set_medians_s=[5.0])
    assert one_copy.level(by_placement=True) == 1.1
    two = Block("base", 1, samples=trials, input_set_medians_s=[1.0, 2.0])
    assert two.level(by_placement=True) == 1.5 and two.level() == 1.1
