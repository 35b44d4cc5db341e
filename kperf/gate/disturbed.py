"""Disturbed blocks: a block during which another process used the GPU, one whose trials
disagree far more than its case's other blocks', or one whose host fell behind the GPU,
caught something besides the code, and its round is measured again (kperf/gate/measure.py;
docs/gate.md, "A disturbed round is measured again", "Other processes on the GPU"). A case
whose rounds stay shared with another process gets no verdict from them
(``judge_shared``). Pure functions over blocks."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from kperf.core.telemetry.processes import spans, who
from kperf.gate.model import Block, CaseData, Verdict


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
# run dry and waited for the host (kperf/core/timing.py, ``reps_queued``).
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
    be measured again: another process used the GPU during one of them, the host fell
    behind the GPU in at least ``behind_share`` of a block's trials, or one of them is
    ``disturbed`` next to all the case's other blocks ('' if none)."""
    earlier, mine = list(history[:-latest]), list(history[-latest:])
    for block in mine:
        if others(block):
            return f"{who(others(block))} used the GPU during the {block.side} block"
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


# --------------------------------------------------------------------------- other processes


def others(block: Block) -> list[dict[str, Any]]:
    """The other processes that used the GPU during a block (kperf/core/telemetry/processes.py;
    [] for none, or not known: a backend without a process list, blocks of before)."""
    return [e for e in block.processes or [] if isinstance(e, dict) and "pid" in e]


def seen_processes(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    """Each other process seen in any of ``blocks``: pid, name, the most GPU memory it held
    (used_mb), the rounds and the number of blocks it was seen in."""
    out: dict[int, dict[str, Any]] = {}
    for block in blocks:
        for e in others(block):
            seen = out.setdefault(e["pid"], {"pid": e["pid"], "name": None, "used_mb": None,
                                             "rounds": [], "blocks": 0})
            seen["name"] = seen["name"] or e.get("name")
            seen["blocks"] += 1
            if block.round not in seen["rounds"]:
                seen["rounds"] = sorted([*seen["rounds"], block.round])
            used = e.get("used_mb")
            if isinstance(used, int | float) and (seen["used_mb"] or 0) < used:
                seen["used_mb"] = used
    return [out[pid] for pid in sorted(out)]


def processes_text(seen: Sequence[dict[str, Any]]) -> str:
    """``another process (pid 1234, python) used the GPU in rounds 3-5``."""
    rounds = {r for e in seen for r in e["rounds"]}
    return f"{who(seen)} used the GPU in round{'s' if len(rounds) > 1 else ''} {spans(rounds)}"


def judge_shared(v: Verdict, data: CaseData) -> Verdict:
    """No verdict from a round shared with another process. A round one of whose blocks
    another process used the GPU during is measured again (``disturbance``); the verdict
    uses the second try. Where a round the verdict uses is still shared (the process
    stayed), the case ends INCONCLUSIVE naming the process, whatever its rounds say, and
    a clock gap is no longer put down to the environment alone (``attribution``
    "process"). Where every such round was measured again without it, the verdict stands
    and its reason names the process. ``v.processes`` (gate.json) lists each one."""
    seen = seen_processes(b for b in data.blocks if b.status == "ok")
    if not seen:
        return v
    v.processes = seen
    text = processes_text(seen)
    used = data.pairs()[:v.rounds] + data.pairs(confirm=True)
    still = [pair for pair in used if others(pair[0]) or others(pair[1])]
    if not still or v.broke:
        again = "" if v.broke else "; measured again without it"
        v.reason = "; ".join(r for r in (v.reason, text + again) if r)
        return v
    rounds = spans(b.round for b, _ in still)
    retried = all(b.retry or h.retry for b, h in still)
    stayed = (f"round{'s' if len(still) > 1 else ''} {rounds} measured again "
              f"with it still there" if retried else f"round{'s' if len(still) > 1 else ''} "
              f"{rounds} shared with it")
    earlier = v.reason.replace(" from outside", " with another process on the GPU")
    v.verdict, v.decided, v.attribution = "INCONCLUSIVE", True, "process"
    v.reason = (f"{text}; it stayed ({stayed}): no verdict from rounds shared with another "
                f"process" + (f"; {earlier}" if earlier else ""))
    return v


def round_note(data: CaseData, base: Block, head: Block) -> str:
    """rounds.md's mark of a round that another process shared: ``(another process: pid
    1234)``, or ``(another process in the first try: pid 1234)`` where the round was measured
    again without it."""
    if others(base) or others(head):
        pids = sorted({e["pid"] for b in (base, head) for e in others(b)})
        return f" (another process: pid {', '.join(map(str, pids))})"
    first = [b for b in data.blocks if b.round == base.round and b.confirm == base.confirm
             and b.retry < max(base.retry, head.retry) and others(b)]
    pids = sorted({e["pid"] for b in first for e in others(b)})
    return f" (another process in the first try: pid {', '.join(map(str, pids))})" if pids else ""
