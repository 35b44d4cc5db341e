"""The gate's verdict model, looks, confirmation, configuration and report, on blocks whose
truth is known. Each test names the rule it guards; removing the rule fails it."""

from __future__ import annotations

import importlib
import inspect
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tools.config import ConfigError
from tools.gate import cli, report
from tools.gate.blocks import case_data
from tools.gate.config import Thresholds, parse_bits
from tools.gate.disturbed import disturbed, usual_spread
from tools.gate.errors import EXIT_BROKEN, EXIT_INCONCLUSIVE, EXIT_PASS, EXIT_REGRESSION
from tools.gate.measure import Run
from tools.gate.model import Block, CaseData, Verdict, attribute, decide_look
from tools.gate.plan import Lane
from tools.gate.sequential import confirm, exit_code, replay

REPO = Path(__file__).resolve().parent.parent
GEMM = "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'triton')"
NORM = "bench_rmsnorm.RmsnormTime.track_time('llama3-8b.hidden', 'bf16', 'triton')"


@pytest.fixture(scope="module")
def th() -> Thresholds:
    return Thresholds.load(REPO / "thresholds.json")


def block(side: str, r: int, t: float, clock: float | None = 1420.0, power: float = 690.0,
          limit: float = 700.0, bits: int | None = 0x4, confirm: bool = False,
          spread: float = 0.0, generation: int | None = None) -> Block:
    """One block; by default each round is its own pair of workers, as the gate runs."""
    samples = [t * (1 + spread * k) for k in (-2, -1, 0, 1, 2)]
    return Block(side, r, samples=samples, clocks=[clock] * 5, power_w=[power] * 5,
                 power_limit_w=limit, throttle_bits=bits, backend="nvml", confirm=confirm,
                 generation=r if generation is None else generation)


def case(name: str, base: list[float], head: list[float], **kw) -> CaseData:
    """Rounds of one block a side; ``kw`` values may be per-side pairs or per-round lists."""
    data = CaseData(name)
    for r, (b, h) in enumerate(zip(base, head, strict=True), start=1):
        per = {k: (v[r - 1] if isinstance(v, list) else v) for k, v in kw.items()}
        pb = {k: (v[0] if isinstance(v, tuple) else v) for k, v in per.items()}
        ph = {k: (v[1] if isinstance(v, tuple) else v) for k, v in per.items()}
        data.blocks += [block("base", r, b, **pb), block("head", r, h, **ph)]
    return data


def noisy(level: float, n: int, sd: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(level * math.exp(sd * x)) for x in rng.standard_normal(n)]


def one(verdicts: list[Verdict], name: str) -> Verdict:
    return next(v for v in verdicts if v.case == name)


# --------------------------------------------------------------------------- decisions


def test_a_clear_regression_is_slow_and_an_unchanged_case_same(th) -> None:
    slow = case(GEMM, noisy(1.0, 6, 0.002, 1), noisy(1.04, 6, 0.002, 2))
    same = case(NORM, noisy(1.0, 12, 0.0005, 3), noisy(1.0, 12, 0.0005, 4), clock=1980.0,
                power=450.0, bits=0)
    verdicts = decide_look([slow, same], th, None, 1, th.sequential.looks)
    assert one(verdicts, GEMM).verdict == "SLOW" and one(verdicts, GEMM).decided
    assert one(verdicts, NORM).verdict == "SAME"
    assert one(verdicts, GEMM).ratio == pytest.approx(1.04, rel=0.005)


def test_rounds_are_the_replicates_not_the_samples(th) -> None:
    """Tight samples inside each block, but rounds that disagree by +-3%: the interval is
    the rounds', so the case is undecided, never SLOW on the blocks' own tightness."""
    base, head = [1.0] * 4, [1.03, 0.99, 1.035, 0.985]
    v = one(decide_look([case(GEMM, base, head)], th, None, 1, th.sequential.looks), GEMM)
    assert not v.decided and v.verdict == "INCONCLUSIVE", v
    assert v.ci[1] - v.ci[0] > 0.03, "the interval must carry the round-to-round spread"


def test_the_suite_wide_correction_applies(th) -> None:
    """One case whose p-value passes the look's alpha alone but not after Benjamini-
    Hochberg over 20 cases is not SLOW (at the last look, which spends the most)."""
    d_base = [1.0] * 6
    d_head = [1.02, 1.03, 1.015, 1.028, 1.018, 1.035]  # p 6e-4: below alpha_k, not below it/20
    cases = [case(GEMM, d_base, d_head)]
    cases += [case(f"{GEMM[:-1]}, {i})", d_base, noisy(1.0, 6, 0.004, 10 + i))
              for i in range(19)]
    looks = th.sequential.looks
    alone = one(decide_look(cases[:1], th, None, looks, looks), GEMM)
    together = one(decide_look(cases, th, None, looks, looks), GEMM)
    assert alone.verdict == "SLOW", alone
    assert together.verdict != "SLOW" and together.q_value > alone.q_value, together


def test_each_look_spends_only_its_share_of_alpha(th) -> None:
    looks = th.sequential.looks
    assert looks > 1
    d_head = [1.021, 1.027, 1.018, 1.024]  # p 1.3e-3: below alpha, above look 1's share
    strict = decide_look([case(GEMM, [1.0] * 4, d_head)], th, None, 1, looks)
    loose = decide_look([case(GEMM, [1.0] * 4, d_head)], th, None, 1, 1)
    assert one(strict, GEMM).p_value == one(loose, GEMM).p_value
    assert one(loose, GEMM).verdict == "SLOW" and one(strict, GEMM).verdict != "SLOW"


def test_environment_clock_gap_needs_the_cycles_to_agree(th) -> None:
    """Thermal bits and a head 5% slower at a 5% lower clock: the same cycles. The case's
    p-value is the larger of time's and cycles': not SLOW."""
    data = case(GEMM, [1.0] * 4, [1.0526, 1.0522, 1.053, 1.0528],
                clock=(1420.0, 1349.0), bits=(0x4, 0x4 | 0x20))
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.attribution == "environment" and "0x20" in attribute(data.pairs(), th).why
    assert v.verdict != "SLOW", v
    assert v.cycles_ratio == pytest.approx(1.0, abs=0.002)
    assert "from outside" in v.reason


def test_the_cycles_p_value_counts_where_the_environment_moved_the_clock(th) -> None:
    """Heat on the head: time +5% in every round, cycles +2% on average but all over the
    place. Both point the same way, but only time is significant: not SLOW."""
    times = [1.05, 1.052, 1.048, 1.051, 1.05, 1.049]
    cycles = [1.00, 1.045, 0.99, 1.05, 1.0, 1.04]
    clocks = [(1420.0, 1420.0 * c / t) for c, t in zip(cycles, times, strict=True)]
    data = case(GEMM, [1.0] * 6, times, clock=clocks, bits=(0x4, 0x4 | 0x40))
    v = one(decide_look([data], th, None, 1, 1), GEMM)
    assert v.attribution == "environment" and v.cycles_ratio > 1.015
    assert v.verdict != "SLOW", v
    assert v.p_value < th.alpha, "time alone is significant: the cycles' p-value decides"


def test_a_clock_the_code_lowered_at_the_power_limit_is_slow_with_why(th) -> None:
    """Both sides at the 700 W limit, the head's clock lower in every round: the code's
    doing. Time decides, and the reason gives energy, clocks and the cycles ratio."""
    data = case(GEMM, [1.771, 1.775, 1.778, 1.772], [1.880, 1.892, 1.885, 1.889],
                clock=[(1425.0, 1340.0), (1421.0, 1334.0), (1424.0, 1336.0), (1422.0, 1337.0)],
                power=(692.0, 693.0))
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.attribution == "code" and v.verdict == "SLOW", v
    assert "energy per call +6." in v.reason and "700 W power limit" in v.reason
    assert "1423 → 1336 MHz" in v.reason and "at equal clocks x0.99" in v.reason


def test_a_clock_that_follows_the_round_is_the_environments(th) -> None:
    clocks = [(1420.0, 1300.0), (1300.0, 1420.0), (1420.0, 1300.0), (1420.0, 1300.0)]
    data = case(GEMM, [1.0] * 4, [1.09, 0.92, 1.09, 1.09], clock=clocks)
    assert attribute(data.pairs(), th).kind == "environment"
    assert "follows the round" in attribute(data.pairs(), th).why


def test_below_the_power_limit_a_lower_clock_is_not_the_codes(th) -> None:
    data = case(GEMM, [1.0] * 4, [1.2] * 4, clock=(1980.0, 1650.0), power=(400.0, 330.0),
                bits=0)
    assert attribute(data.pairs(), th).kind == "environment"
    v = one(decide_look([data], th, None, 1, th.sequential.looks), GEMM)
    assert v.verdict != "SLOW" and v.cycles_ratio == pytest.approx(1.0, abs=0.001)


def test_one_side_at_the_power_limit_is_not_enough_for_the_codes_clock(th) -> None:
    """Base at the 700 W limit (cap bit), head at 500 W without it, the head's clock
    lower in every round: the code can only own a clock gap when both sides run at the
    limit (the power controller then sets the clock by the work's energy)."""
    data = case(GEMM, [1.0] * 4, [1.06] * 4, clock=(1420.0, 1340.0), power=(690.0, 500.0),
                bits=(0x4, 0))
    who = attribute(data.pairs(), th)
    assert (who.kind, who.why) == ("environment", "not at the power limit on both sides")


def test_where_heat_moved_the_clock_same_needs_the_cycles_too(th) -> None:
    """Thermal bits at head, time the same to 0.05% in every round, the head's clock
    +3-9% round to round: time alone says SAME, cycles cannot say anything yet. A verdict
    where the environment moved the clock must hold in both; this one is not decided."""
    head = [1.0005, 0.9995, 1.0, 1.0004, 0.9996, 1.0]
    clocks = [(1420.0, 1420.0 * f) for f in (1.03, 1.09, 1.04, 1.08, 1.03, 1.09)]
    data = case(GEMM, [1.0] * 6, head, clock=clocks, bits=(0x4, 0x4 | 0x20))
    v = one(decide_look([data], th, None, th.sequential.looks, th.sequential.looks), GEMM)
    assert v.attribution == "environment" and v.ci[0] > 1 / 1.015 and v.ci[1] < 1.015, v
    assert not v.decided and "not decided in both time and cycles" in v.reason, v


def test_a_significant_change_below_the_class_threshold_is_not_slow(th) -> None:
    """+0.8% in every round, to 0.01%: beyond doubt, but below the compute class's 1.5%
    smallest change that matters: never SLOW (here SAME: its interval is in the band)."""
    head = [1.008 + 0.0001 * (k % 3) for k in range(8)]
    v = one(decide_look([case(GEMM, [1.0] * 8, head)], th, None, 1, 1), GEMM)
    assert v.p_value < 1e-6 and v.ratio == pytest.approx(1.009, abs=0.002)
    assert v.verdict == "SAME", v


def test_a_static_figure_is_never_judged_as_the_cap_class(th) -> None:
    """Whatever share of its blocks ran at the power cap, an exact class stays exact."""
    static = th.classes["static"]
    assert th.class_at_cap(static, 1.0) is static
    assert th.class_at_cap(th.classes["bandwidth"], 1.0).name == th.at_cap_class


def test_static_figures_are_exact_and_occupancy_higher_is_better(th) -> None:
    regs = CaseData("bench_gemm.GemmRegisters.track_value('sm_90a', 'fp16', 'triton')",
                    unit="registers", blocks=[Block("base", 1, value=168.0),
                                             Block("head", 1, value=170.0)])
    occ = CaseData("bench_gemm.GemmOccupancy.track_value('sm_90a', 'fp16', 'triton')",
                   unit="waves", blocks=[Block("base", 1, value=1.0), Block("head", 1, value=2.0)])
    verdicts = replay([regs, occ], th)
    assert [v.verdict for v in verdicts] == ["SLOW", "FAST"]
    assert all(v.confirmed is None for v in verdicts), "exact figures are not re-measured"


def test_failures_and_skips(th) -> None:
    broken = CaseData(GEMM, blocks=[block("base", 1, 1.0),
                                    Block("head", 1, "failed", "RemoteError: NaN in output")])
    new = CaseData(NORM, blocks=[Block("base", 1, "skipped", "RemoteSkip: no such case"),
                                 block("head", 1, 1.0)])
    verdicts = replay([broken, new], th)
    assert one(verdicts, GEMM).broke and "NaN in output" in one(verdicts, GEMM).reason
    assert one(verdicts, NORM).reason.startswith("skipped at base")
    assert exit_code(verdicts) == EXIT_BROKEN


def test_exit_code_precedence() -> None:
    def v(verdict: str, broke: bool = False) -> Verdict:
        return Verdict("c", "", "compute", verdict, broke=broke)

    assert exit_code([v("SLOW"), v("INCONCLUSIVE", broke=True)]) == EXIT_BROKEN
    assert exit_code([v("SLOW"), v("INCONCLUSIVE")]) == EXIT_REGRESSION
    assert exit_code([v("SAME"), v("INCONCLUSIVE")]) == EXIT_INCONCLUSIVE
    assert exit_code([v("SAME"), v("FAST")]) == EXIT_PASS


# --------------------------------------------------------------------------- sequence


def test_a_decided_case_keeps_its_verdict_whatever_comes_after(th) -> None:
    data = case(GEMM, [1.0] * 3, [1.0] * 3)
    assert replay([data], th)[0].verdict == "SAME"
    data.blocks += [block("base", 4, 1.0), block("head", 4, 1.5)]  # never measured live
    v = replay([data], th)[0]
    assert v.verdict == "SAME" and v.look == 1 and v.rounds == 3


def test_flagged_cases_stand_only_if_the_remeasure_alone_moved(th) -> None:
    data = case(GEMM, [1.0, 1.0, 1.0], [1.04, 1.042, 1.038])
    waiting = replay([data], th)[0]
    assert waiting.candidate == "SLOW" and waiting.confirmed is None
    assert waiting.verdict == "INCONCLUSIVE" and "not re-measured" in waiting.reason
    kept = case(GEMM, [1.0, 1.0, 1.0], [1.04, 1.042, 1.038])
    kept.blocks += [block("base", 4, 1.0, confirm=True), block("head", 4, 1.041, confirm=True)]
    assert replay([kept], th)[0].verdict == "SLOW" and replay([kept], th)[0].confirmed
    lost = case(GEMM, [1.0] * 6, [1.04, 1.045, 1.035, 1.042, 1.038, 1.04])
    lost.blocks += [block("base", 7, 1.0, confirm=True), block("head", 7, 1.012, confirm=True)]
    v = replay([lost], th)[0]
    assert v.candidate == "SLOW" and v.verdict == "INCONCLUSIVE" and v.confirmed is False, v
    assert "not confirmed by fresh workers" in v.reason and "x1.012" in v.reason


def test_pairs_of_workers_are_the_replicates_not_the_rounds_of_one_pair(th) -> None:
    """An A/A on an H200 (2026-12-01): a bandwidth-bound kernel 2.5% apart in every one of four
    rounds of one pair of worker processes, 0.8% in a fresh pair. One pair's rounds make
    it look certain; the pairs show it is where the processes landed: no verdict."""
    data = case(NORM, [1.0] * 4, [0.9757, 0.9744, 0.9741, 0.9749], clock=1980.0, bits=0,
                power=450.0, generation=0)
    first = replay([data], th)[0]
    assert first.candidate == "FAST", "one pair alone: flagged"
    data.blocks += [block("base", 5, 1.0, confirm=True, clock=1980.0, bits=0, power=450.0),
                    block("head", 5, 0.9925, confirm=True, clock=1980.0, bits=0, power=450.0)]
    v = replay([data], th)[0]
    assert v.verdict == "INCONCLUSIVE" and v.confirmed is False, v
    assert "disagree too much" in v.reason


def test_a_change_every_pair_shows_is_confirmed_though_pairs_differ_by_1pct(th) -> None:
    """The injected +3.1% GEMM (bf16) on the H200 (2026-12-01, docs/journal/2026-12-01.md): three
    new pairs read +2.02, +2.02, +2.21% and were flagged at look 1; the fresh pair read +3.13 and
    +3.53%. All pairs together give p ~0.007: real, but not below the 0.00028 of alpha that
    look 1 may spend. The pooled check is held at the run's alpha, so it stands."""
    data = case(GEMM, [1.0] * 3, [1.0204, 1.0204, 1.0223], clock=1462.0)
    first = replay([data], th)[0]
    assert first.candidate == "SLOW" and first.look == 1, first
    data.blocks += [block("base", 4, 1.0, confirm=True, generation=9, clock=1462.0),
                    block("head", 4, 1.0318, confirm=True, generation=9, clock=1462.0),
                    block("base", 5, 1.0, confirm=True, generation=9, clock=1462.0),
                    block("head", 5, 1.0359, confirm=True, generation=9, clock=1462.0)]
    v = replay([data], th)[0]
    assert v.verdict == "SLOW" and v.confirmed is True, v


def test_one_pair_cannot_claim_more_precision_than_pairs_have(th) -> None:
    """Twelve rounds agreeing to 0.02% inside one pair of workers, 0.3% apart: the
    interval still carries the spread of pairs measured on the hardware (pair_offset_sd),
    so this is not a 0.3% change, and its interval reaches past 0.5% (SAME only because
    the bandwidth class's band is 0.75%, thresholds.json ``same_ratio``)."""
    one_pair = case(NORM, [1.0] * 12, [1.003 + 0.0002 * (k % 2) for k in range(12)],
                    clock=1980.0, bits=0, power=450.0, generation=0)
    v = one(decide_look([one_pair], th, None, 1, 1), NORM)
    floor = th.classes["bandwidth"].pair_offset_sd  # at least a 90% interval of the floor
    assert math.log(v.ci[1] / v.ci[0]) > 2 * 1.6 * floor and v.ci[1] > 1.005, v
    assert v.verdict == "SAME" and th.classes["bandwidth"].same_ratio == 0.0075, v


def test_confirm_checks_cycles_where_the_environment_moved_the_clock(th) -> None:
    v = Verdict(GEMM, "", "compute", "SLOW", attribution="environment", ratio=1.05)
    data = CaseData(GEMM, blocks=[block("base", 9, 1.0, clock=1420.0, confirm=True),
                                  block("head", 9, 1.05, clock=1352.0, confirm=True)])
    out = confirm(v, data, Thresholds.load(REPO / "thresholds.json"))
    assert out.verdict == "INCONCLUSIVE" and out.confirmed is False


def test_all_pairs_together_must_hold_in_cycles_too_where_the_environment_moved_it(th):
    """Flagged SLOW with the clock moved from outside; the re-measure alone moved 5% in time
    and in cycles, but over all pairs the cycles did not move (the first rounds' head ran
    5% slower at a 5% lower clock): as at every look, time alone cannot claim it."""
    v = Verdict(GEMM, "", "compute", "SLOW", attribution="environment", ratio=1.05, look=1)
    data = case(GEMM, [1.0] * 4, [1.05, 1.051, 1.049, 1.05], clock=(1420.0, 1352.0))
    data.blocks += [block("base", 5, 1.0, confirm=True), block("head", 5, 1.05, confirm=True)]
    out = confirm(v, data, th)
    assert out.verdict == "INCONCLUSIVE" and out.confirmed is False, out
    assert "all pairs together" in out.reason


class FakeClient:
    """Answers measure requests; records the order of sides per case and round."""

    def __init__(self, side: str, log: list) -> None:
        self.side, self.log = side, log
        self.plans: list[dict] = []

    def shutdown(self) -> None:
        pass

    def request(self, message: dict, timeout_s: float) -> dict:
        self.log.append((message["spec"]["case"], self.side))
        self.plans.append(message.get("plan"))
        windows = [{"sm_clock_mhz_median": 1420.0, "power_w_mean": 690.0,
                    "power_limit_w": 700.0, "throttle_bits_or": 4}] * 5
        return {"samples": [1.0] * 5, "measurement": {"windows": windows,
                                                      "telemetry_backend": "nvml"}}


def test_each_case_alternates_which_side_goes_first(tmp_path: Path, th) -> None:
    log: list = []
    clients = {}

    def make_client(slot: str, **kw) -> FakeClient:
        side = "base" if "-base-" in slot else "head"
        return clients.setdefault(slot, FakeClient(side, log))

    cases = [{"name": f"c{i}", "kind": "time", "spec": {"case": f"c{i}"}} for i in range(3)]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=[c["name"] for c in cases])])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=lambda s: None)
    for number in (1, 2, 3, 4):
        run.round(plan.lanes[0], number, [c["name"] for c in cases], False)
    for name in ("c0", "c1", "c2"):
        firsts = [side for k, (c, side) in enumerate(log) if c == name and k % 2 == 0]
        assert firsts in (["base", "head"] * 2, ["head", "base"] * 2), (name, firsts)
    # every block moves its buffers and takes the configured trials, without an energy burst
    seq = th.sequential
    assert seq.placements > 0
    assert seq.placements > 0 and seq.trials_at_cap > seq.trials_per_block
    assert all(p == {"trials": seq.trials_per_block, "energy_s": 0, "placements": seq.placements,
                     "trials_at_cap": seq.trials_at_cap}
               for c in clients.values() for p in c.plans)


def test_a_resumed_run_starts_a_new_generation_of_workers(tmp_path: Path, th) -> None:
    """A run cut off in the middle of a pair's rounds resumes with new processes: they
    are a new generation, so the statistics never take two pairs' rounds for one pair's."""
    cases = [{"name": "c0", "kind": "time", "spec": {"case": "c0"}}]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=["c0"])])
    clients: dict = {}

    def make_client(slot: str, **kw) -> FakeClient:
        return clients.setdefault(slot, FakeClient("base" if "-base-" in slot else "head", []))

    def run() -> Run:
        return Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client,
                   log=lambda s: None)

    rpg = th.sequential.rounds_per_generation
    with (tmp_path / "blocks.jsonl").open("w") as f:
        for r in range(1, rpg + 2):  # one round into the second pair, then cut off
            for side in ("base", "head"):
                f.write(json.dumps({"case": "c0", "side": side, "round": r,
                                    "generation": (r - 1) // rpg, "samples": [1.0]}) + "\n")
    resumed = run()
    assert resumed.generation == 1 and resumed.pair_due()
    resumed.new_generation(resumed.generation + 1, {"gpu": ["c0"]}, rpg + 2)
    assert resumed.generation == 2 and not resumed.pair_due()
    resumed.pair_rounds = rpg
    assert resumed.pair_due()
    assert {"gate-gpu-base-g2", "gate-gpu-head-g2"} <= set(clients)


# --------------------------------------------------------------------------- config


def test_thresholds_errors_name_the_file_and_field(tmp_path: Path) -> None:
    raw = json.loads((REPO / "thresholds.json").read_text())
    path = tmp_path / "t.json"
    for mutate, where in (
            (lambda r: r.__setitem__("alpha", None), "/alpha"),
            (lambda r: r["classes"]["compute"].__setitem__("min_ratio", -1), "/classes/compute"),
            (lambda r: r["sequential"].__setitem__("min_rounds", -3), "/sequential/min_rounds"),
            (lambda r: r["throttle_bits"]["environment"].__setitem__("nvml", "10"),
             "/throttle_bits/environment/nvml"),
            (lambda r: r["rules"][1].__setitem__("match", "("), "/rules/1/match"),
            (lambda r: r["rules"][1].__setitem__("class", "warp-bound"), "/rules/1/class"),
            (lambda r: r["sequential"].__setitem__("max_rounds", 2), "/sequential/max_rounds"),
            (lambda r: r.__setitem__("at_cap_class", "static"), "/at_cap_class"),
            (lambda r: r.__setitem__("at_cap_class", "warp-bound"), "/at_cap_class")):
        broken = json.loads(json.dumps(raw))
        mutate(broken)
        path.write_text(json.dumps(broken))
        with pytest.raises(ConfigError) as err:
            Thresholds.load(path)
        assert str(path) in str(err.value) and where in str(err.value), err.value
    path.write_text(json.dumps(raw).replace('"alpha": 0.01', '"alpha": NaN'))
    with pytest.raises(ConfigError, match=r"alpha|NaN"):
        Thresholds.load(path)


def test_bit_masks_are_hex_only() -> None:
    assert parse_bits("0x10") == 16
    with pytest.raises(ValueError, match="hexadecimal"):
        parse_bits("10")


def test_every_ops_time_suite_gets_its_ops_bound_class(th) -> None:
    from kernels.registry import get_op, op_names

    checked = 0
    for name in op_names():
        op = get_op(name)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if getattr(cls, "op", None) != name or not hasattr(cls, "track_time"):
                continue
            for case_name in cls.params[0]:
                full = f"bench_{name}.{cls.__name__}.track_time({case_name!r}, 'fp16', 'triton')"
                _, klass = th.rule_for(full)
                assert klass.name == ("decode" if "decode" in case_name else op.bound), full
                checked += 1
    assert checked > 0


# --------------------------------------------------------------------------- report


def test_hostile_case_names_stay_in_their_cell() -> None:
    name = "bench_x.X.track_time('a|b', '`c`', '<script>x</script>', '@you')"
    v = Verdict(name, "", "compute", "SLOW", reason="x | y", ratio=1.5)
    text = report.markdown([v], 1, {"label": "l|`", "base": "a" * 10, "head": "b" * 10,
                                    "base_how": "given as `HEAD~1`", "machine": "m|x",
                                    "design": "d", "alpha": 0.01, "beta": 0.05,
                                    "correction": "BH"})
    row = next(line for line in text.splitlines() if "bench" in line)
    cells = [c for c in row.split(" | ")]
    assert len(row.replace("\\|", "").split("|")) == 9, row  # 7 columns, 8 bars + ends
    assert "<script>" not in text and "@you" not in text and "&lt;script&gt;" in text
    assert "**SLOW**" in cells[-1]


def test_base_head_and_hidden_characters_are_escaped_in_the_report() -> None:
    """base and head go into gate.md as code only when they are commit ids; anything else
    (a gate-state.json written by hand) is escaped text. U+202E and its kin, which show a
    text reordered, and control characters are gone from every field."""
    v = Verdict("bench_x.X.track_time('a\u202eb', 'c\u2066d')", "", "compute", "SAME",
                reason="r\u200bs\x1b[31m")
    info = {"label": "l\u202e", "base": "[x](//e)`<img>", "head": "0123abcdef" * 4,
            "base_how": "h\u2067", "machine": "m", "design": "d", "alpha": 0.01,
            "beta": 0.05, "correction": "BH"}
    text = report.markdown([v], 0, info)
    assert "base \\[x\\](//e)\\`&lt; (h" in text, text  # the first 10 characters, as text
    assert "head `0123abcdef`" in text
    hidden = "\u202e\u2066\u2067\u200b\x1b"
    assert not set(hidden) & set(text), ascii(text)
    assert not set(hidden) & set(report.md("x\u202ey\x00z")), "md() itself"


class OpLog(FakeClient):
    """A fake worker that also says which request reached which pair, and when it stopped."""

    def __init__(self, slot: str, events: list) -> None:
        super().__init__("base" if "-base-" in slot else "head", [])
        self.slot, self.events, self.batches = slot, events, []

    def shutdown(self) -> None:
        self.events.append((self.slot, "shutdown"))

    def request(self, message: dict, timeout_s: float) -> dict:
        self.events.append((self.slot, message["op"]))
        if message["op"] == "prepare":
            self.batches.append(message.get("batch"))
        if message["op"] == "warm":
            assert all("case" in spec for spec in message["specs"])  # what it will measure
            return {"seconds": 0.0, "missing": []}
        if message["op"] == "static":
            return {"figures": {"registers": 64.0}, "artifacts": ["cubin"]}
        return super().request(message, timeout_s)


def _run_to_the_end(tmp_path: Path, th, cases: list[dict], make_client,
                    log=lambda s: None) -> Run:
    """A gate run over ``cases`` (one lane) with fake workers, measured until it stops;
    its workers retired at the end, as tools/gate/cli.py does."""
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases,
                        [Lane(cases=[c["name"] for c in cases])])
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=log)
    try:
        run.run()
    finally:
        run.retire_workers()
    return run


def test_the_next_pair_starts_ahead_and_no_worker_outlives_the_run(tmp_path: Path, th) -> None:
    """Every pair after the first got its imports done ("warm", no GPU) before its turn,
    and every worker ever started is stopped at the end, the pair started ahead for a
    round that never came too."""
    events: list = []
    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, OpLog(slot, events))

    cases = [{"name": f"c{i}", "kind": "time", "spec": {"case": f"c{i}"}} for i in range(2)]
    _run_to_the_end(tmp_path, th, cases, make_client)
    assert th.sequential.rounds_per_generation == 1
    used = sorted({int(slot.rsplit("-g", 1)[1]) for slot, op in events if op == "prepare"})
    started = sorted({int(slot.rsplit("-g", 1)[1]) for slot, _ in events
                      if not slot.endswith("-static")})
    assert len(used) >= th.sequential.min_rounds  # a fresh pair every round
    assert set(started) - set(used) <= {max(started)}  # at most the one started ahead
    for g in used[1:]:
        for side in ("base", "head"):
            slot = f"gate-gpu-{side}-g{g}"
            assert [op for s, op in events if s == slot][:2] == ["warm", "prepare"], slot
    for slot in clients:
        assert (slot, "shutdown") in events, slot
    # each prepare names the side's cases still to prepare, to be compiled ahead at once
    first = clients["gate-gpu-base-g1"].batches
    assert first[0] == [c["spec"] for c in cases] and len(first) == len(cases)
    # what each pair's preparation cost, per case and side (docs/journal/2026-12-01.md's restart
    # figures)
    prepared = [json.loads(line) for line in (tmp_path / "prepares.jsonl").open()]
    assert {row["generation"] for row in prepared} == set(used)
    assert {(row["case"], row["side"]) for row in prepared if row["generation"] == used[0]} \
        == {(c, side) for c in ("c0", "c1") for side in ("base", "head")}
    assert all(row["wall_s"] >= 0 for row in prepared)


def test_a_finished_run_stops_its_static_figures_workers_too(tmp_path: Path, th) -> None:
    """The static figures' workers (one a side, idle for GATE_IDLE_S = 900 s) are stopped
    with the timed pairs when the run ends, not left to wait out their idle time."""
    events: list = []
    clients: dict = {}

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, OpLog(slot, events))

    cases = [{"name": "t0", "kind": "time", "spec": {"case": "t0"}},
             {"name": "s0", "kind": "static", "spec": {"case": "s0"}, "target": "sm_90a",
              "figure": "registers"}]
    _run_to_the_end(tmp_path, th, cases, make_client)
    static = {slot for slot, op in events if op == "static"}
    assert static == {"gate-gpu-base-static", "gate-gpu-head-static"}
    assert all((slot, "shutdown") in events for slot in clients)
    last_static = max(i for i, (_, op) in enumerate(events) if op == "static")
    assert all((slot, "shutdown") in events[last_static:] for slot in static)


def test_only_blocks_at_the_power_cap_share_the_host_with_a_pair_importing_ahead(
        tmp_path: Path, th) -> None:
    """A short kernel's block waits until the next pair's imports are over (host load
    slowed a 70 us kernel's block by 7.7% on an H200 on 2026-12-01); a block of a case
    whose last block was at the power cap (long calls, the GPU's queue stays full) goes on
    meanwhile."""
    import time

    events: list = []
    clients: dict = {}

    class Slow(OpLog):
        def request(self, message: dict, timeout_s: float) -> dict:
            if message["op"] == "warm":
                events.append((self.slot, "warm-start"))
                time.sleep(0.3)
                events.append((self.slot, "warm-end"))
                return {"seconds": 0.3, "missing": []}
            out = super().request(message, timeout_s)
            if message["op"] == "measure":
                events.append((message["spec"]["case"], "block"))
                out["measurement"]["at_cap"] = message["spec"]["case"] == "capped"
            return out

    def make_client(slot: str, **kw) -> OpLog:
        return clients.setdefault(slot, Slow(slot, events))

    cases = [{"name": n, "kind": "time", "spec": {"case": n}} for n in ("capped", "short")]
    _run_to_the_end(tmp_path, th, cases, make_client)
    importing, overlapped = 0, set()
    for slot, what in events:
        importing += {"warm-start": 1, "warm-end": -1}.get(what, 0)
        if what == "block" and importing:
            overlapped.add(slot)
    assert overlapped == {"capped"}, overlapped


# --------------------------------------------------------------------------- disturbed rounds


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
    from tools.gate.disturbed import disturbance, host_behind

    ahead, behind = block("base", 1, 80e-6), block("head", 1, 80e-6)
    ahead.reps_queued, behind.reps_queued = [246.9, 4.0, 44.4, 45.6, 19.3], [0.5] * 4 + [9.0]
    assert (host_behind(ahead), host_behind(behind)) == (0.0, 0.8)
    assert "80% of the head block" in disturbance([ahead, behind], 2, 10, 0.0025, 0.5)
    assert disturbance([ahead, behind], 2, 10, 0.0025, 0.0) == ""  # 0: never
    assert disturbance([ahead, behind], 2, 10, 0.0025, 0.9) == ""
    assert host_behind(block("head", 1, 80e-6)) == 0.0  # records of before: unknown


def test_a_block_keeps_how_far_the_host_was_ahead_in_each_trial() -> None:
    from tools.gate.blocks import block_of

    windows = [{"sm_clock_mhz_median": 1980.0, "power_w_mean": 450.0, "power_limit_w": 700.0,
                "throttle_bits_or": 0}] * 2
    result = {"samples": [80e-6, 80e-6], "measurement": {
        "windows": windows, "telemetry_backend": "nvml", "reps_queued": [250.0, 0.7]}}
    assert block_of(result, "head", 1, False).reps_queued == [250.0, 0.7]
    del result["measurement"]["reps_queued"]  # a worker of before: unknown
    assert block_of(result, "head", 1, False).reps_queued == []


def test_a_block_keeps_each_placed_copys_median_through_its_log(tmp_path: Path) -> None:
    from tools.gate.blocks import BlockLog, block_of, case_data

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


def test_a_run_cut_off_measures_no_block_more(tmp_path: Path, th) -> None:
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


# --------------------------------------------------------------------------- the power cap


def test_at_the_power_cap_a_block_is_its_trials_mean_elsewhere_their_median() -> None:
    """The trials of one softmax block at 700 W on an H200 (%, docs/journal/2026-12-01.md 'Before
    midnight'): the clock's cycle puts two slow peaks in 15 trials, which the median
    ignores and the user's time average does not."""
    trials = [1 + p / 100 for p in (-0.6, -1.1, -1.5, -0.3, 1.9, 8.0, 6.1, 3.5, 0.3, 0.0,
                                    -0.5, -1.0, -0.4, 2.8, 5.1)]
    capped = Block("base", 1, samples=trials, clocks=[1900.0, 1700.0], at_cap=True)
    free = Block("base", 1, samples=trials, clocks=[1900.0, 1700.0], at_cap=False)
    assert capped.level() == pytest.approx(sum(trials) / len(trials))
    assert free.level() == sorted(trials)[7] < capped.level()
    assert (capped.clock(), free.clock()) == (1800.0, 1800.0)
    old = Block("base", 1, samples=[1.0, 1.0, 5.0])  # a record from before at_cap: median
    assert old.level() == 1.0


def test_a_case_the_power_controller_held_down_is_judged_as_the_cap_class(th) -> None:
    """Softmax is bandwidth-bound (0.5%), but at the cap its rounds scatter like a
    GEMM's: judged as compute there, and the report says so. Power near the limit without
    the cap bit (a block after a GEMM reads the board's average high) is not the cap."""
    assert th.classes["compute"].min_ratio > th.classes["bandwidth"].min_ratio
    ratios = [1.008, 0.992, 1.009, 0.993, 1.008, 0.992, 1.007, 0.993]
    capped = case(NORM, [1.0] * 8, ratios, clock=1800.0, power=695.0, bits=0x4)
    near = case(NORM, [1.0] * 8, ratios, clock=1980.0, power=685.0, bits=0)
    v_capped = one(decide_look([capped], th, None, th.sequential.looks,
                               th.sequential.looks), NORM)
    v_near = one(decide_look([near], th, None, th.sequential.looks, th.sequential.looks), NORM)
    assert (v_capped.klass, v_capped.rule_class, v_capped.verdict) == (
        "compute", "bandwidth", "SAME")
    assert "at the power cap: judged as compute" in report.fmt_verdict(v_capped)
    assert (v_near.klass, v_near.rule_class, v_near.verdict) == ("bandwidth", "", "INCONCLUSIVE")
    decode = "bench_gemm.GemmTime.track_time('llama3-8b.gate_up_proj.decode16', 'fp16', 'triton')"
    v_decode = one(decide_look([case(decode, [1.0] * 8, ratios, bits=0x4)], th, None, 1,
                               th.sequential.looks), decode)
    assert v_decode.klass == "decode"  # a wider class stays as it is


@pytest.mark.parametrize(("capped_rounds", "klass"), [(6, "compute"), (4, "bandwidth")])
def test_the_cap_class_needs_most_blocks_capped_not_all(th, capped_rounds: int,
                                                        klass: str) -> None:
    """75% of a bandwidth case's blocks held down by the power controller: judged as
    compute; 50%: bandwidth still (thresholds.json ``at_cap_class``, "mostly")."""
    ratios = [1.0] * 8
    bits = [0x4 if r < capped_rounds else 0 for r in range(8)]
    data = case(NORM, [1.0] * 8, ratios, clock=1800.0, power=695.0, bits=bits)
    assert data.capped_share(th) == capped_rounds / 8
    v = one(decide_look([data], th, None, 1, th.sequential.looks), NORM)
    assert v.klass == klass and v.rule_class == ("bandwidth" if klass == "compute" else "")


def test_an_ops_code_digest_covers_its_folder_and_the_shared_code_only(tmp_path: Path) -> None:
    from tools.gate.plan import code_digest

    def side(name: str, gemm: str = "g", softmax: str = "s", shared: str = "op",
             record: str = "r") -> Path:
        site = tmp_path / name
        for rel, text in (("kernels/__init__.py", ""), ("kernels/op.py", shared),
                          ("kernels/gemm/triton_gemm.py", gemm),
                          ("kernels/softmax/triton_softmax.py", softmax),
                          ("kernels-0.1.0.dist-info/RECORD", record),
                          ("kernels/gemm/__pycache__/triton_gemm.cpython-312.pyc", record)):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(text)
        return site

    ops = ["gemm", "softmax"]
    base = code_digest(side("base"), "gemm", ops)
    assert code_digest(side("softmax-edit", softmax="s2", record="r2"), "gemm", ops) == base
    assert code_digest(side("gemm-edit", gemm="g2"), "gemm", ops) != base
    assert code_digest(side("shared-edit", shared="op2"), "gemm", ops) != base
    # an op the plan does not know of is not left out: its folder counts as shared code
    assert code_digest(side("softmax-edit2", softmax="s3"), "gemm", ["gemm"]) != base
