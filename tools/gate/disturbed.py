"""Disturbed blocks: a block whose trials disagree far more than its case's other blocks',
or one whose host fell behind the GPU, caught something besides the code, and its round is
measured again (tools/gate/measure.py; docs/gate.md, "A disturbed round is measured
again"). Pure functions over blocks."""

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
    rounds of unchanged kernels that read more than 2% off, -12% and -8% too
    (docs/journal/2026-12-01.md, "Late night of 2026-12-01"). Its round is measured again."""
    return factor > 0 and usual is not None and block.spread() > max(factor * usual, floor)


# At most this many reps still queued when the host queued a trial's last: the GPU had
# run dry and waited for the host (harness/timing.py, ``reps_queued``).
BEHIND_REPS = 1.5


def host_behind(block: Block) -> float:
    """The share of a block's trials in which the host had fallen behind the GPU.

    The events then hold the host's launch latency as well as the kernel: on an H200 a
    70 us Triton RMSNorm block with the host behind in 5 of 5 trials read +11%, its other
    blocks never more than 0.5% off (docs/journal/2026-12-01.md, "Before midnight of 2026-12-01").
    Both of that round's blocks spread 4-6%, so neither stood out next to the other, and the
    spread rule, with no earlier round to compare, let it through."""
    known = [q for q in block.reps_queued if q is not None]
    return sum(q <= BEHIND_REPS for q in known) / len(known) if known else 0.0


def disturbance(history: Sequence[Block], latest: int, factor: float, floor: float,
                behind_share: float = 0.0) -> str:
    """Why the ``latest`` blocks of a case's ``history`` (its round just measured) are to
    be measured again: the host fell behind the GPU in at least ``behind_share`` of a
    block's trials, or one of them is ``disturbed`` next to all the case's other blocks
    ('' if neither)."""
    earlier, mine = list(history[:-latest]), list(history[-latest:])
    for block in mine:
        share = host_behind(block)
        if behind_share > 0 and share >= behind_share:
            return f"the host fell behind the GPU in {share:.0%} of the {block.side} block's trials"
    for i, block in enumerate(mine):
        usual = usual_spread(earlier + mine[:i] + mine[i + 1:])
        if disturbed(block, usual, factor, floor):
            return (f"the {block.side} block's trials spread {block.spread():.2%}, "
                    f"the case's usual {usual:.2%}")
    return ""
