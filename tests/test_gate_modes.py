"""A decode round judged mode by mode (kperf/gate/model.py ``placed_log_ratio``): how
many copies land in a kernel's fast places is a draw; a change of code moves every mode."""

from __future__ import annotations

import math

import pytest

from kperf.gate.model import MODE_GAP, Block, copy_modes, placed_log_ratio, side_modes

FAST, SLOW = 88.0e-6, 101.0e-6


def block(side: str, fast: int, total: int = 16, scale: float = 1.0) -> Block:
    scatter = [1 + 0.001 * (-1) ** i for i in range(total)]  # copies of a mode differ a little
    copies = [FAST * scale * scatter[i] for i in range(fast)] + [
        SLOW * scale * scatter[i] for i in range(total - fast)]
    return Block(side, 1, samples=[SLOW * scale] * 5, input_set_medians_s=copies)


def test_copies_split_into_two_modes_only_across_a_gap() -> None:
    modes = copy_modes(block("base", 3).input_set_medians_s)
    assert [n for _, n in modes] == [3, 13]
    assert modes[0][0] == pytest.approx(FAST, rel=0.002)
    assert modes[1][0] == pytest.approx(SLOW, rel=0.002)
    close = [1.0, 1.0 + MODE_GAP * 0.9, 1.0 + MODE_GAP * 0.95]
    assert [n for _, n in copy_modes(close)] == [3]


def test_a_different_draw_of_fast_copies_is_no_change() -> None:
    """Same code, 3 fast copies of 16 against 1: by the copies' means +1.6%, mode by mode
    nothing."""
    base, head = block("base", 3), block("head", 1)
    assert math.log(head.level(True) / base.level(True)) > 0.015
    assert abs(placed_log_ratio(base, head)) < 0.0015
    base, head = block("base", 1), block("head", 4)
    assert abs(placed_log_ratio(base, head)) < 0.0015


@pytest.mark.parametrize(("fast_base", "fast_head"), [(3, 1), (1, 3), (2, 5), (8, 8), (15, 1)])
@pytest.mark.parametrize("change", [1.02, 0.98, 1.10, 0.90])
def test_a_change_of_code_moves_every_mode(fast_base: int, fast_head: int,
                                           change: float) -> None:
    base, head = block("base", fast_base), block("head", fast_head, scale=change)
    assert placed_log_ratio(base, head) == pytest.approx(math.log(change), abs=0.0015)


@pytest.mark.parametrize(("fast_base", "fast_head"), [(3, 0), (0, 3), (16, 2), (0, 0)])
@pytest.mark.parametrize("change", [1.02, 0.90])
def test_a_block_of_one_mode_is_compared_by_the_copies_means(fast_base: int, fast_head: int,
                                                             change: float) -> None:
    """A lone mode at 90.9 us against 88 and 101 us is the fast one 3% slower or the slow
    one 10% faster: never matched to a mode, the means decide."""
    base, head = block("base", fast_base), block("head", fast_head, scale=change)
    assert placed_log_ratio(base, head) == pytest.approx(
        math.log(head.level(True) / base.level(True)))


def test_a_lone_mode_halfway_between_two_falls_back_to_the_means() -> None:
    """A head of one mode (95 us) against a base of 88 and 101: neither is clearly its
    own; the copies' means decide."""
    base = block("base", 8)
    head = Block("head", 1, samples=[95e-6] * 5, input_set_medians_s=[95e-6] * 16)
    assert placed_log_ratio(base, head) == pytest.approx(
        math.log(head.level(True) / base.level(True)))


@pytest.mark.parametrize(("fast_base", "fast_head"), [(3, 0), (0, 3), (16, 2), (0, 16)])
@pytest.mark.parametrize("change", [1.02, 0.90, 1.10])
def test_a_lone_mode_is_placed_among_its_own_sides_modes(fast_base: int, fast_head: int,
                                                         change: float) -> None:
    """Over a case's rounds each side shows both modes; a block of one mode is its own
    side's nearer mode, so even a 10% change (its lone mode nearer the other side's other
    mode) is read as it is. Without both sides' modes, the means (above)."""
    rounds = [(block("base", 4), block("head", 4, scale=change)),
              (block("base", fast_base), block("head", fast_head, scale=change))]
    sides = side_modes(rounds)
    assert sides is not None
    assert sides[1][0] == pytest.approx(FAST * change, rel=0.002)
    base, head = rounds[1]
    assert placed_log_ratio(base, head, sides) == pytest.approx(math.log(change), abs=0.0015)


def test_no_sides_modes_unless_both_sides_show_two() -> None:
    assert side_modes([(block("base", 3), block("head", 0))]) is None
    assert side_modes([(block("base", 3), block("head", 2)), (block("base", 0),
                                                               block("head", 0))]) is not None
