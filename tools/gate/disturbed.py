"""Disturbed blocks: a block whose trials disagree far more than its case's other blocks'
caught something besides the code, and its round is measured again (tools/gate/measure.py;
docs/gate.md, "A disturbed round is measured again"). Pure functions over blocks."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tools.gate.model import Block


def usual_spread(blocks: Sequence[Block]) -> float | None:
    """The median spread of the trials of measured blocks (None if there are none)."""
    spreads = [b.spread() for b in blocks if b.status == "ok" and len(b.samples) > 1]
    return statistics.median(spreads) if spreads else None


def disturbed(block: Block, usual: float | None, factor: float, floor: float) -> bool:
    """Whether a block's trials disagree far more than ``usual`` (its case's other blocks').

    Such a block caught something besides the code: in four gate A/As on an H200, the
    thresholds' rule (10 times, 0.25%) picked 17 of 236 rounds, among them 6 of the 7
    rounds of unchanged kernels that read more than 2% off, -12% and -8% too (docs/perf.md,
    "Late night of 2026-12-01"). Its round is measured again."""
    return factor > 0 and usual is not None and block.spread() > max(factor * usual, floor)


def disturbance(history: Sequence[Block], latest: int, factor: float, floor: float) -> str:
    """Why the ``latest`` blocks of a case's ``history`` (its round just measured) are to
    be measured again: one of them is ``disturbed`` next to all the case's other blocks
    ('' if none is)."""
    earlier, mine = list(history[:-latest]), list(history[-latest:])
    for i, block in enumerate(mine):
        usual = usual_spread(earlier + mine[:i] + mine[i + 1:])
        if disturbed(block, usual, factor, floor):
            return (f"the {block.side} block's trials spread {block.spread():.2%}, "
                    f"the case's usual {usual:.2%}")
    return ""
