"""Disturbed rounds: a block far noisier than its case or whose host fell behind the GPU is
measured again, the second try counts and the first is kept; what a block keeps through
its log; a run cut off measures no block more; rounds.md shows the rounds used."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from kperf.gate import cli, report
from kperf.gate.blocks import case_data
from kperf.gate.disturbed import disturbed, usual_spread
from kperf.gate.measure import Run
from kperf.gate.plan import Lane
from kperf.gate.sequential import replay
from tests._gate import NORM, OpLog, _run_to_the_end, block, case


def test_a_block_far_noisier_than_its_case_is_disturbed(th) -> None:
    seq = th.sequential
    quiet = [block("base", r, 80e-6, spread=0.0005) for r in range(1, 5)]
    usual = usual_spread(quiet)
    assert usual == pytest.approx(quiet[0].spread())
    for spread, expected in ((0.0005, False), (0.004, False), (0.02, True)):
        candidate = block("head", 5, 80e-6, spread=spread)
        assert disturbed(candidate, usual, seq.disturbed_factor, seq.disturbed_floor) \
            is expected, spread
    # below the floor a quiet kernel's block is kept, however many times its usual
    tiny = block("head", 5, 80e-6, spread=0.0008)
    assert tiny.spread() > seq.disturbed_factor * usual / 100
    assert not disturbed(tiny, usual / 100, seq.disturbed_factor, seq.disturbed_floor)
    assert not disturbed(candidate, None, seq.disturbed_factor, seq.disturbed_floor)
    assert not disturbed(candidate, usual, 0, seq.disturbed_floor)  # 0: never


def test_a_round_measured_again_counts_with_its_second_try(th) -> None:
    data = case(NORM, [1.0] * 3, [1.0] * 3)
    data.blocks[2:4] = [block("base", 2, 1.0), block("head", 2, 1.3)]  # disturbed first try
    data.blocks += [block("head", 2, 1.0), block("base", 2, 1.0)]
    for b in data.blocks[-2:]:
        b.retry = 1
    base, head = data.pairs()[1]
    assert (base.retry, head.retry) == (1, 1) and head.level() == 1.0
    assert replay([data], th)[0].verdict == "SAME"
    # a second try cut off after one side: the round stands as first measured, one pair
    data.blocks.pop()
    base, head = data.pairs()[1]
    assert (base.retry, head.retry) == (0, 0) and head.level() == 1.3


@pytest.mark.parametrize("kind", ["spread", "host"])
def test_a_disturbed_round_is_measured_again_and_the_first_try_kept(
        tmp_path: Path, th, kind: str) -> None:
    """A/A of a 80 us kernel. ``spread``: in round 2 the base block's trials read +20% and
    scatter (a block on an H200 read 95-101 us against 80 us so). ``host``: in round 1,
    with no earlier round to compare, the host falls behind the GPU in every trial of the
    head block, which reads +11% and scatters no more than its base (an H200's Triton
    RMSNorm did so). The round is measured again, both sides; the first try stays in
    blocks.jsonl; the verdict is SAME. Without the second try it is not SAME."""
    wiggle = [1.0, 1.0003, 0.9997, 1.0001, 0.9999]
    hit_round, hit_side = (2, "base") if kind == "spread" else (1, "head")
    calls: dict[str, int] = {}

    class Disturbing(OpLog):
        def request(self, message: dict, timeout_s: float) -> dict:
            out = super().request(message, timeout_s)
            if message["op"] == "measure":
                calls[self.side] = calls.get(self.side, 0) + 1
                first = calls[self.side] == hit_round
                hit = self.side == hit_side and first
                if kind == "spread":
                    scale = [1.2 + 0.05 * k if hit else 1.0 for k in range(5)]
                else:  # both blocks of the round scatter, only the head is slow
                    scale = [(1.11 if hit else 1.0) * (1 + 0.04 * k) if first else 1.0
                             for k in range(5)]
                out["samples"] = [80e-6 * w * f for w, f in zip(wiggle, scale, strict=True)]
                out["measurement"]["at_cap"] = False
                out["measurement"]["reps_queued"] = [0.5 if kind == "host" and hit
                                                     else 200.0] * 5
            return out

    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, Disturbing(slot, []))

    cases = [{"name": NORM, "kind": "time", "spec": {"case": "norm"}}]
    lines: list[str] = []
    run = _run_to_the_end(tmp_path, th, cases, make_client, log=lines.append)
    again = [line for line in lines if "measured again" in line]
    assert len(again) == 1 and again[0].startswith(f"round {hit_round}:"), again
    assert f"{hit_side} block" in again[0]
    assert ("host fell behind" in again[0]) is (kind == "host")
    rows = [json.loads(line) for line in (tmp_path / "blocks.jsonl").open()]
    hit_rows = [r for r in rows if r["round"] == hit_round]
    assert [(r["side"], r["retry"]) for r in hit_rows] in (
        [("base", 0), ("head", 0), ("base", 1), ("head", 1)],
        [("head", 0), ("base", 0), ("head", 1), ("base", 1)])
    verdict = run.verdicts()[0]
    assert verdict.verdict == "SAME" and verdict.rounds_again == 1
    assert "(1 again) |" in report.table_lines([verdict], False)[-1]
    without_retry = case_data(cases, [r for r in rows if not r["retry"]])
    assert replay(without_retry, th)[0].verdict != "SAME"


def test_a_block_whose_host_fell_behind_the_gpu_is_disturbed() -> None:
    from kperf.gate.disturbed import disturbance, host_behind

    ahead, behind = block("base", 1, 80e-6), block("head", 1, 80e-6)
    ahead.reps_queued, behind.reps_queued = [246.9, 4.0, 44.4, 45.6, 19.3], [0.5] * 4 + [9.0]
    assert (host_behind(ahead), host_behind(behind)) == (0.0, 0.8)
    assert "80% of the head block" in disturbance([ahead, behind], 2, 10, 0.0025, 0.5)
    assert disturbance([ahead, behind], 2, 10, 0.0025, 0.0) == ""  # 0: never
    assert disturbance([ahead, behind], 2, 10, 0.0025, 0.9) == ""
    assert host_behind(block("head", 1, 80e-6)) == 0.0  # records of before: unknown


def test_a_block_keeps_how_far_the_host_was_ahead_in_each_trial() -> None:
    from kperf.gate.blocks import block_of

    windows = [{"sm_clock_mhz_median": 1980.0, "power_w_mean": 450.0, "power_limit_w": 700.0,
                "throttle_bits_or": 0}] * 2
    result = {"samples": [80e-6, 80e-6], "measurement": {
        "windows": windows, "telemetry_backend": "nvml", "reps_queued": [250.0, 0.7],
        "rep_hold_s": 150e-6, "trials_retaken": 1, "mode": "events"}}
    block = block_of(result, "head", 1, False)
    assert block.reps_queued == [250.0, 0.7]
    assert (block.rep_hold_s, block.trials_retaken, block.method) == (150e-6, 1, "events")
    for key in ("reps_queued", "rep_hold_s", "trials_retaken", "mode"):  # a worker of before
        del result["measurement"][key]
    block = block_of(result, "head", 1, False)
    assert (block.reps_queued, block.rep_hold_s, block.trials_retaken,
            block.method) == ([], None, None, None)


def test_a_block_keeps_each_placed_copys_median_through_its_log(tmp_path: Path) -> None:
    from kperf.gate.blocks import BlockLog, block_of, case_data

    windows = [{"sm_clock_mhz_median": 1980.0, "power_w_mean": 510.0, "power_limit_w": 700.0,
                "throttle_bits_or": 0}] * 3
    copies_s = [88.4e-6, 101.5e-6, 88.3e-6, 101.6e-6]
    result = {"samples": [95.2e-6, 99.6e-6, 95.2e-6], "measurement": {
        "windows": windows, "telemetry_backend": "nvml", "input_set_medians_s": copies_s}}
    block = block_of(result, "base", 2, False)
    assert block.input_set_medians_s == copies_s
    log = BlockLog(tmp_path / "blocks.jsonl")
    case = {"name": "bench_gemm.GemmTime.track_time('d16', 'fp16', 'tilelang')"}
    log.append(case, block, {})
    (data,) = case_data([case], log.read())
    assert data.blocks[0].input_set_medians_s == copies_s
    del result["measurement"]["input_set_medians_s"]  # a worker of before: unknown
    assert block_of(result, "base", 2, False).input_set_medians_s == []


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """Python's own SIGINT handler, as in a terminal: a process that a non-interactive
    shell starts in the background ignores SIGINT, and there interrupt_main() does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_run_cut_off_measures_no_block_more(tmp_path: Path, th, sigint_handled) -> None:
    """SIGTERM or Ctrl-C in the middle of a round: the block being measured ends, and no
    other is started (after a device call's SIGTERM an H200 gate measured the rest of its
    round, the first block 20% slow)."""
    import _thread
    import time

    measures: list[str] = []

    class Interrupting(OpLog):
        def request(self, message: dict, timeout_s: float) -> dict:
            if message["op"] == "measure":
                measures.append(message["spec"]["case"])
                if len(measures) == 3:
                    _thread.interrupt_main()  # a signal while the third block is measured
                    time.sleep(1.0)  # the block's own time
            return super().request(message, timeout_s)

    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, Interrupting(slot, []))

    names = [f"c{i}" for i in range(4)]
    cases = [{"name": n, "kind": "time", "spec": {"case": n}} for n in names]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=names)])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=lambda s: None)
    with pytest.raises(KeyboardInterrupt):
        try:
            run.run()
        finally:
            run.retire_workers()
    assert len(measures) == 3, measures  # a round of 4 cases would have taken 8 blocks
    rows = [json.loads(line) for line in (tmp_path / "blocks.jsonl").open()]
    assert len(rows) == 3  # all that was measured is kept for --resume


def test_rounds_md_shows_each_round_the_verdict_used(th) -> None:
    data = case(NORM, [1.0] * 5, [1.0, 1.002, 0.999, 1.5, 1.0])
    data.blocks[2].retry = data.blocks[3].retry = 1  # round 2, measured again
    verdicts, share = replay([data], th), th.sequential.host_behind_share
    assert verdicts[0].verdict == "SAME" and verdicts[0].rounds == 3
    row = report.rounds_markdown([data], verdicts, share).splitlines()[-1]
    assert row.startswith("| bench\\_rmsnorm") and "| SAME |" in row
    assert "+0.00, +0.20 (again), -0.10, 2 more after the verdict, not used" in row
    data.blocks[2].reps_queued = data.blocks[3].reps_queued = [0.5, 0.6, 200.0]
    row = report.rounds_markdown([data], verdicts, share).splitlines()[-1]
    assert "+0.20 (again) (host behind), -0.10," in row


def test_rounds_md_shows_a_decode_case_by_its_placed_copies(th) -> None:
    """The decode class judges a round by its placed copies, mode by mode; rounds.md shows
    that figure. Round 1 of an H200 injected run (2026-12-03): the head's trials' median
    sat at its fast copies' 87.7 us, the base's at 99 us, the copies' means 3.44% apart,
    while the fast copies of the two sides agree to 0.38% and the slow ones to 0.31%:
    (2 x 0.383% - 0.312%) / 3, weighted by the copies behind the smaller side, is +0.15%
    (docs/journal/2026-12-03.md, 'Night of 2026-12-03' and 'Late night')."""
    name = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'tilelang')"
    copies = {"base": [87.04, 101.02, 101.09, 87.71], "head": [87.84, 100.74, 87.62, 87.71]}
    trials = {"base": 99.0, "head": 87.7}
    data = case(name, [trials["base"]] * 3, [trials["head"]] * 3)
    for b in data.blocks:
        b.input_set_medians_s = [c * 1e-6 for c in copies[b.side]]
        b.samples = [s * 1e-6 for s in b.samples]
    verdicts = replay([data], th)
    assert verdicts[0].klass == "decode"
    row = report.rounds_markdown([data], verdicts, th.sequential.host_behind_share,
                                 frozenset({"decode"})).splitlines()[-1]
    assert "+0.15, +0.15, +0.15" in row, row
    row = report.rounds_markdown([data], verdicts, th.sequential.host_behind_share).splitlines()[-1]
    assert "-11.41" in row, row  # the trials' medians, as rounds.md showed them before
