"""The warm-up's early end far from the power cap (``Plan.cool_warmup_min_s``,
kperf/core/warmup.py) on a simulated board with an energy counter."""

from __future__ import annotations

import pytest

from kperf.core.timing import Plan

from .fakes import measure_on_a_counter

COOL = Plan(trials=2, min_trial_s=0.02, warmup_min_s=0.8, cool_warmup_min_s=0.2,
            warmup_max_s=3.0, energy_s=0)


def test_a_board_far_from_its_cap_by_the_energy_counter_ends_the_warm_up_early() -> None:
    """RMSNorm draws ~490-520 W of 700 on an H200 (GPU-38de9528, 2026-12-04, its blocks'
    windows): no cap can hold its clock down, so once
    its times and clocks agree the warm-up need not wait out the averaged reading."""
    m = measure_on_a_counter(0.02, COOL, 400.0, 400.0)
    assert m.settled and m.warmup_cool and not m.at_cap
    assert COOL.cool_warmup_min_s <= m.warmup_s < COOL.warmup_min_s, m.warmup_s
    assert m.as_record()["warmup_cool"] is True
    assert m.warmup_trace[-1]["counter_w"] == pytest.approx(400.0, rel=0.1)


@pytest.mark.parametrize(("counter_w", "reading_w", "counter", "why"), [
    (690.0, 400.0, True, "the averaged reading lags a kernel that reaches the cap"),
    (400.0, 690.0, True, "the reading still carries a capped case before it"),
    (400.0, 400.0, False, "no energy counter: the averaged reading alone"),
])
def test_no_early_end_unless_counter_and_reading_both_say_far_from_the_cap(
        counter_w: float, reading_w: float, counter: bool, why: str) -> None:
    m = measure_on_a_counter(0.02, COOL, counter_w, reading_w, counter)
    assert not m.warmup_cool, why
    assert m.warmup_s >= COOL.warmup_min_s, (why, m.warmup_s)


def test_the_cool_rule_is_off_at_zero_and_needs_a_span_of_counter_updates() -> None:
    from kperf.core.warmup import COOL_COUNTER_SPAN_S, _cool

    m = measure_on_a_counter(0.02, COOL.with_overrides(cool_warmup_min_s=0.0), 400.0, 400.0)
    assert not m.warmup_cool and m.warmup_s >= COOL.warmup_min_s
    near = Plan().cap_near_fraction * 700.0
    assert _cool(near - 1.0, near - 1.0, 700.0, Plan())
    assert not _cool(near + 1.0, near - 1.0, 700.0, Plan())
    assert not _cool(near - 1.0, None, 700.0, Plan())
    assert not _cool(near - 1.0, near - 1.0, None, Plan())
    assert 0.1 <= COOL_COUNTER_SPAN_S < Plan().cool_warmup_min_s
