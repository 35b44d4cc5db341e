"""The disturbed-round rules at their edges (kperf/gate/disturbed.py), written for the
survivors of mutmut over the module (docs/reliability.md, "mutmut"): which blocks make a
case's usual spread, a spread exactly at the limit, the latest round's blocks judged
against the earlier ones only, and the host-behind share at its threshold."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kperf.gate.disturbed import (
    disturbance,
    disturbed,
    host_behind,
    judge_shared,
    processes_text,
    round_note,
    seen_processes,
    usual_spread,
)
from kperf.gate.model import CaseData, Verdict
from tests._gate import NORM, block, case


def test_the_usual_spread_is_of_measured_blocks_with_two_trials_or_more() -> None:
    quiet = [block("base", r, 80e-6, spread=0.001) for r in range(1, 4)]
    one_trial = replace(block("base", 4, 80e-6), samples=[80e-6])  # spread 0: left out
    failed = replace(block("base", 5, 80e-6, spread=0.05), status="failed")
    two_trials = replace(block("base", 6, 80e-6), samples=[80e-6, 80.8e-6])
    assert usual_spread([]) is None
    assert usual_spread([one_trial, failed]) is None
    assert usual_spread([*quiet, one_trial, one_trial, one_trial]) == pytest.approx(
        quiet[0].spread())
    assert usual_spread([*quiet, failed, failed, failed]) == pytest.approx(quiet[0].spread())
    assert usual_spread([two_trials]) == pytest.approx(two_trials.spread())
    assert two_trials.spread() > 0


def test_a_spread_at_the_limit_is_not_disturbed_and_a_factor_below_one_still_judges() -> None:
    at = block("head", 5, 80e-6, spread=0.001)
    limit = at.spread()
    assert not disturbed(at, limit / 10, 10, 0.0)  # exactly 10 x: not past it
    assert disturbed(at, limit / 10 * 0.999, 10, 0.0)
    assert not disturbed(at, 1e-9, 10, limit)  # exactly the floor: not past it
    assert disturbed(at, 1e-9, 10, limit * 0.999)
    assert disturbed(at, limit / 0.6, 0.5, 0.0)  # a factor under 1 is a rule too


def test_the_latest_blocks_are_judged_against_the_earlier_ones_and_each_other() -> None:
    """Four quiet rounds, then a round whose head block scatters: found in that round
    (latest=2); the noisy block among the earlier ones is not the latest round's."""
    earlier = [block(side, r, 80e-6, spread=0.0005) for r in range(1, 5)
               for side in ("base", "head")]
    noisy_head = block("head", 5, 80e-6, spread=0.02)
    latest = [block("base", 5, 80e-6, spread=0.0005), noisy_head]
    why = disturbance([*earlier, *latest], 2, 10, 0.0025)
    assert why.startswith("the head block's trials spread")
    assert disturbance([*earlier[:-1], noisy_head, *earlier[-1:], latest[0]], 1, 10,
                       0.0025) == ""
    # the noisy block alone in the latest round is judged by every other block
    assert disturbance([*earlier, noisy_head], 1, 10, 0.0025).startswith("the head block")
    # a case whose blocks all scatter so: not disturbed, though its first block was quiet
    scattered = [block("base", r, 80e-6, spread=0.02) for r in range(2, 7)]
    assert disturbance([earlier[0], *scattered, noisy_head], 1, 10, 0.0025) == ""


def test_the_host_behind_share_counts_at_its_threshold_and_is_off_by_default() -> None:
    behind = replace(block("base", 1, 80e-6), reps_queued=[1.0, 1.5, 9.0, None])
    assert host_behind(behind) == pytest.approx(2 / 3)
    assert disturbance([behind], 1, 10, 0.0025) == ""  # behind_share 0: not looked at
    said = disturbance([behind], 1, 10, 0.0025, behind_share=2 / 3)
    assert said == "the host fell behind the GPU in 67% of the base block's trials"
    assert disturbance([behind], 1, 10, 0.0025, behind_share=0.7) == ""
    assert host_behind(replace(behind, reps_queued=[])) == 0.0
    always = replace(behind, reps_queued=[1.0] * 5)  # behind in every trial
    assert disturbance([always], 1, 10, 0.0025) == ""  # still not looked at by default


def _with(b, *entries: dict) -> object:
    return replace(b, processes=list(entries))


def test_each_other_process_is_listed_once_with_its_most_memory_rounds_and_blocks() -> None:
    a = {"pid": 7, "name": "python", "used_mb": 500}
    seen = seen_processes([
        _with(block("base", 1, 1.0), a, {"pid": 3, "used_mb": None}, "not an entry",
              {"name": "no pid"}),
        _with(block("head", 1, 1.0), {**a, "used_mb": 900}),
        _with(block("base", 3, 1.0), {**a, "name": None, "used_mb": 200})])
    assert seen == [
        {"pid": 3, "name": None, "used_mb": None, "rounds": [1], "blocks": 1},
        {"pid": 7, "name": "python", "used_mb": 900, "rounds": [1, 3], "blocks": 3}]
    assert processes_text(seen[1:]) == ("another process (pid 7, python) used the GPU "
                                        "in rounds 1, 3")
    one = seen_processes([_with(block("base", 2, 1.0), a)])
    assert processes_text(one).endswith("used the GPU in round 2")


def _shared_case(retried: bool, side: str = "both") -> CaseData:
    """Three rounds; round 2 shared with pid 7 (on its ``side``'s block, or both), measured
    again with it still there where ``retried``."""
    data = case(NORM, [1.0] * 3, [1.0] * 3)
    p = {"pid": 7, "name": "python"}
    base, head = data.blocks[2], data.blocks[3]
    if side != "base":
        data.blocks[3] = _with(head, p)
    if side != "head":
        data.blocks[2] = _with(base, p)
    if retried:
        data.blocks += [replace(_with(b, p), retry=1) for b in (base, head)]
    return data


def test_a_round_still_shared_leaves_the_case_without_a_verdict() -> None:
    for retried, says in ((False, "round 2 shared with it"),
                          (True, "round 2 measured again with it still there")):
        for side in ("both", "head", "base"):
            data = _shared_case(retried, side)
            v = judge_shared(Verdict(NORM, "", "bandwidth", "SAME", "clock fell from outside",
                                     decided=True, rounds=3), data)
            assert round_note(data, *data.pairs()[1]) == " (another process: pid 7)"
            assert (v.verdict, v.attribution) == ("INCONCLUSIVE", "process")
            assert says in v.reason and v.reason.endswith(
                "; clock fell with another process on the GPU"), v.reason
    v = judge_shared(Verdict(NORM, "", "bandwidth", "SAME", decided=True, rounds=3),
                     _shared_case(False))
    assert v.reason.endswith("no verdict from rounds shared with another process")


def test_a_round_measured_again_without_the_process_keeps_its_verdict() -> None:
    data = _shared_case(False)
    data.blocks += [replace(b, retry=1, processes=[]) for b in data.blocks[2:4]]
    v = judge_shared(Verdict(NORM, "", "bandwidth", "SLOW", decided=True, rounds=3), data)
    assert v.verdict == "SLOW"
    assert v.reason == ("another process (pid 7, python) used the GPU in round 2; measured "
                        "again without it")
    base, head = data.pairs()[1]
    assert round_note(data, base, head) == " (another process in the first try: pid 7)"
    first_base, first_head = data.blocks[2], data.blocks[3]
    assert round_note(data, first_base, first_head) == " (another process: pid 7)"
    assert round_note(data, *data.pairs()[0]) == ""
    # round 1 measured again too, for another reason: round 2's first try is not its own
    data.blocks += [replace(b, retry=1) for b in data.blocks[0:2]]
    assert data.pairs()[0][0].retry == 1 and round_note(data, *data.pairs()[0]) == ""
    broke = judge_shared(Verdict(NORM, "", "bandwidth", "BROKEN", decided=True, rounds=3,
                                 broke=True), _shared_case(False))
    assert broke.verdict == "BROKEN" and broke.reason.endswith("used the GPU in round 2")
