"""The order of the sides at the power cap (kperf/gate/look.py ``without_order``): the
first block of a round follows another case's load, so at the cap it may read slower; the
sides alternate, so the effect can be taken out of the rounds at one degree of freedom."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from kperf.core import stats
from kperf.gate.look import case_rounds, without_order
from kperf.gate.model import CaseData
from kperf.gate.sequential import replay
from tests._gate import NORM, block, one


def alternating(change: float, order: float, rounds: int, noise: float = 0.002,
                seed: int = 1, capped: bool = True) -> CaseData:
    """Rounds whose first block reads ``order`` slower; base first in odd rounds."""
    rng = np.random.default_rng(seed)
    at_cap = {"power": 698.0, "bits": 0x4} if capped else {"power": 400.0, "bits": 0}
    data = CaseData(NORM)
    for r in range(1, rounds + 1):
        base_first = r % 2 == 1
        base_t, head_t = 1.0e-3, 1.0e-3 * change * math.exp(noise * rng.standard_normal())
        if base_first:
            base_t *= 1.0 + order
        else:
            head_t *= 1.0 + order
        b, h = block("base", r, base_t, **at_cap), block("head", r, head_t, **at_cap)
        b.at_cap = h.at_cap = capped
        b.t, h.t = (100.0 * r, 100.0 * r + 3) if base_first else (100.0 * r + 3, 100.0 * r)
        data.blocks += [b, h]
    return data


def test_an_order_effect_at_the_cap_is_same_once_taken_out(th) -> None:
    """Same code, the first block 2% slow (a softmax at the cap read 0.8-1.2%): the rounds
    swing +-2% by order; less the order they agree to the noise."""
    data = alternating(1.0, 0.02, 8)
    v = one(replay([data], th), NORM)
    assert (v.klass, v.verdict) == ("compute", "SAME")
    assert v.ratio == pytest.approx(1.0, abs=0.003)
    assert v.rounds <= 6
    raw = case_rounds(data, data.groups(), th, False, False)
    assert raw.fitted == 1


def test_a_real_change_at_the_cap_under_an_order_effect_is_slow(th) -> None:
    data = alternating(1.04, 0.015, 8, seed=3)
    data.blocks += [b for b in alternating(1.04, 0.015, 2, seed=4).blocks]
    for b in data.blocks[16:]:
        b.confirm, b.round, b.generation = True, b.round + 8, 9
    v = one(replay([data], th), NORM)
    assert v.verdict == "SLOW"
    assert v.confirmed is True
    assert v.ratio == pytest.approx(1.04, abs=0.004)


def test_the_change_is_the_mean_of_the_two_orders_means() -> None:
    """Four rounds base first, three head first: the plain mean would carry a seventh of
    the effect; the estimate is the balanced one."""
    first, second = [0.03, 0.031, 0.029, 0.03], [-0.01, -0.011, -0.009]
    d = [[x] for x in first + second]
    out, fitted = without_order(d, [[True]] * 4 + [[False]] * 3)
    assert fitted == 1
    balanced = (statistics.fmean(first) + statistics.fmean(second)) / 2
    assert statistics.fmean(x for g in out for x in g) == pytest.approx(balanced)
    assert max(abs(g[0] - balanced) for g in out) < 0.0011


@pytest.mark.parametrize("orders", [
    [[True], [False], [True], [False], [True]],  # two rounds head first: too few
    [[True], [False], [True], [False], [True], [None], [False]],  # an order unknown
])
def test_too_few_rounds_of_an_order_fit_nothing(orders) -> None:
    d = [[0.01 * i] for i in range(len(orders))]
    assert without_order(d, orders) == (d, 0)


def test_a_pair_of_workers_with_two_rounds_is_left_as_it_is() -> None:
    """Within a pair of workers the rounds' spread has its own degrees of freedom; the
    adjustment is defined for pairs of one round (the gate's default)."""
    d = [[0.02, -0.02], [0.021], [-0.019]]
    orders = [[True, False], [True], [False]]
    assert without_order(d, orders) == (d, 0)


def test_off_the_cap_the_order_is_not_fitted(th) -> None:
    data = alternating(1.0, 0.0, 6, capped=False)
    rounds = case_rounds(data, data.groups(), th, False, False)
    assert rounds.fitted == 0
    assert [g[0] for g in rounds.time] == pytest.approx(
        [math.log(h.level() / b.level()) for b, h in data.pairs()])


def test_a_fitted_effect_costs_the_pairs_a_degree_of_freedom() -> None:
    """Six pairs of one round, their spread far above the floors: the interval is the
    t-interval with k - 2 degrees of freedom once one effect was fitted."""
    d = [[x] for x in (0.010, -0.008, 0.004, 0.012, -0.011, 0.002)]
    free, fitted = (stats.random_effects(d, 0.95, 0.0005, 0.001, f) for f in (0, 1))
    mean = statistics.fmean(g[0] for g in d)
    for c in (free, fitted):
        assert math.log(c.ratio) == pytest.approx(mean)
        assert c.p_value > 0.05
    width = math.log(fitted.ci_high) - math.log(fitted.ci_low)
    free_width = math.log(free.ci_high) - math.log(free.ci_low)
    # the same data, with the spread scaled by (k-1)/(k-2) and t with k-2 df
    expected = free_width * (sps.t.ppf(0.975, 4) / sps.t.ppf(0.975, 5)) * math.sqrt(5 / 4)
    assert width == pytest.approx(expected, rel=0.02)
