"""tools.gate on synthetic asv results and per-sample records whose truth is known."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

from harness import record
from harness.telemetry import WindowStats
from harness.timing import Measurement
from tools import gate

REPO = Path(__file__).resolve().parent.parent
MACHINE = "synthetic"
ENV = "virtualenv-py3.11"
BASE, HEAD = "a" * 40, "b" * 40
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]
TIME = "bench_x.XTime.track_time"
NAN = float("nan")


def _samples(level: float, n: int, seed: int, cov: float = 0.003) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in level * (1 + cov * rng.standard_normal(n))]


class Side:
    """What one side measured in one round: case -> value / samples / clocks / bits."""

    def __init__(self) -> None:
        self.cases: dict[str, dict] = {}

    def time(self, case: str, samples: list[float] | None, clock: float | None = None,
             bits: int | None = None, backend: str = "nvml") -> Side:
        self.cases[case] = {"bench": TIME, "samples": samples, "clock": clock, "bits": bits,
                            "backend": backend}
        return self

    def value(self, bench: str, value: float | None) -> Side:
        self.cases[bench] = {"bench": bench, "value": value}
        return self


def _write_round(round_dir: Path, commit: str, side: Side, monkeypatch) -> None:
    results: dict[str, list] = {}
    time_cases = [c for c, d in side.cases.items() if d["bench"] == TIME]
    if time_cases:
        values = [NAN if side.cases[c]["samples"] == "skipped" else
                  None if side.cases[c]["samples"] is None else
                  float(np.median(side.cases[c]["samples"])) for c in time_cases]
        samples = [s if isinstance(s := side.cases[c]["samples"], list) else None
                   for c in time_cases]
        results[TIME] = [values, [[repr(c) for c in time_cases]], "v1", 0, 1.0, None, None,
                         None, None, [1] * len(time_cases), [8] * len(time_cases), samples]
    for name, d in side.cases.items():
        if d["bench"] != TIME:
            results[name] = [d["value"], [], "v1", 0, 1.0]
    path = round_dir / "results" / MACHINE / f"{commit[:8]}-{ENV}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # asv writes NaN for a skipped benchmark; json.dumps does the same
    path.write_text(json.dumps({"version": 2, "commit_hash": commit, "env_name": ENV,
                                "result_columns": COLUMNS, "results": results}))
    (round_dir / "results" / "benchmarks.json").write_text(json.dumps({
        TIME: {"param_names": ["case"], "unit": "seconds"}, "version": 2}))
    monkeypatch.setenv("KPERF_MACHINE", MACHINE)
    monkeypatch.setenv("ASV_COMMIT", commit)
    monkeypatch.setenv("ASV_ENV_NAME", ENV)
    for case in time_cases:
        d = side.cases[case]
        if not isinstance(d["samples"], list) or d["clock"] is None:
            continue
        windows = [WindowStats(n_readings=3, sm_clock_mhz_median=d["clock"],
                               throttle_bits_or=d["bits"]) for _ in d["samples"]]
        m = Measurement(samples=d["samples"], number=1, mode="events", reps=10,
                        calls_per_rep=1, estimate_s=d["samples"][0], warmup_trials=3,
                        warmup_s=0.3, settled=True, telemetry_backend=d["backend"],
                        telemetry_reason="", windows=windows)
        record.write_record(TIME, {"case": case}, {"kind": "time", "measurement": m.as_record()},
                            root=round_dir / "records")


@pytest.fixture
def thresholds(tmp_path: Path) -> gate.Thresholds:
    return gate.Thresholds.load(REPO / "thresholds.json")


def _run(tmp_path: Path, monkeypatch, rounds: list[tuple[Side, Side]],
         th: gate.Thresholds, confirm: tuple[Side, Side] | None = None) -> dict[str, gate.Verdict]:
    pr = tmp_path / "pr"
    for i, (base, head) in enumerate(rounds, 1):
        _write_round(pr / f"round-{i:02d}", BASE, base, monkeypatch)
        _write_round(pr / f"round-{i:02d}", HEAD, head, monkeypatch)
    if confirm:
        _write_round(pr / "confirm", BASE, confirm[0], monkeypatch)
        _write_round(pr / "confirm", HEAD, confirm[1], monkeypatch)
    state = {"base": BASE, "head": HEAD, "machine": MACHINE, "base_how": "given"}
    return {v.case: v for v in gate.analyse(pr, state, th)}


def _name(case: str) -> str:
    return f"{TIME}({case!r})"


def test_known_truth_shift_no_shift_clock_shift_and_few_samples(tmp_path, monkeypatch,
                                                                   thresholds) -> None:
    rounds = []
    for r in range(3):
        s = 10 * r
        base = (Side().time("shift", _samples(1e-3, 8, s + 1), 1980)
                .time("same", _samples(1e-3, 8, s + 2), 1980)
                .time("clockdrop", _samples(1e-3, 8, s + 3), 1980)
                .time("clockdrop+slow", _samples(1e-3, 8, s + 4), 1980)
                .time("few", _samples(1e-3, 1, s + 5), 1980))
        head = (Side().time("shift", _samples(1.10e-3, 8, s + 6), 1980)
                .time("same", _samples(1e-3, 8, s + 7), 1980)
                # 1980 -> 1500 MHz and 1980/1500 the time: same cycles, no code change
                .time("clockdrop", _samples(1.32e-3, 8, s + 8), 1500)
                .time("clockdrop+slow", _samples(1.32e-3 * 1.2, 8, s + 9), 1500)
                .time("few", _samples(1e-3, 1, s + 10), 1980))
        rounds.append((base, head))
    v = _run(tmp_path, monkeypatch, rounds, thresholds)
    assert v[_name("shift")].verdict == "SLOW"
    assert v[_name("shift")].ratio == pytest.approx(1.10, abs=0.02)
    assert v[_name("same")].verdict == "SAME"
    drop = v[_name("clockdrop")]
    assert drop.verdict == "INCONCLUSIVE"
    assert "clocks differed (base 1980 MHz, head 1500 MHz)" in drop.reason
    assert "does not hold in cycles" in drop.reason
    assert drop.cycles_ratio == pytest.approx(1.0, abs=0.02)
    both = v[_name("clockdrop+slow")]
    assert both.verdict == "SLOW" and "holds in cycles" in both.reason
    few = v[_name("few")]
    assert few.verdict == "INCONCLUSIVE"
    assert "too few samples (base 3, head 3; need 6)" in few.reason
    assert gate.exit_code(list(v.values())) == gate.EXIT_REGRESSION


def test_faster_and_exit_zero(tmp_path, monkeypatch, thresholds) -> None:
    rounds = [(Side().time("k", _samples(1e-3, 10, r)),
               Side().time("k", _samples(0.8e-3, 10, r + 50))) for r in range(2)]
    v = _run(tmp_path, monkeypatch, rounds, thresholds)
    assert v[_name("k")].verdict == "FAST"
    assert v[_name("k")].clock_base_mhz is None  # no records: no clocks claimed
    assert gate.exit_code(list(v.values())) == gate.EXIT_PASS


def test_failures_skips_and_missing_cases(tmp_path, monkeypatch, thresholds) -> None:
    base = (Side().time("broken", _samples(1e-3, 10, 1)).time("new", "skipped")
            .time("was_broken", None).time("gone", _samples(1e-3, 10, 2))
            .time("both_skipped", "skipped"))
    head = (Side().time("broken", None).time("new", _samples(1e-3, 10, 3))
            .time("was_broken", _samples(1e-3, 10, 4)).time("both_skipped", "skipped"))
    v = _run(tmp_path, monkeypatch, [(base, head)], thresholds)
    assert v[_name("broken")].broke and "failed at head" in v[_name("broken")].reason
    assert v[_name("new")].reason == "skipped at base: no baseline"
    assert "failed at base" in v[_name("was_broken")].reason
    assert v[_name("gone")].reason == "missing at head"
    assert _name("both_skipped") not in v
    assert all(x.verdict == "INCONCLUSIVE" for x in v.values())
    assert gate.exit_code(list(v.values())) == gate.EXIT_BROKEN
    del v[_name("broken")]
    assert gate.exit_code(list(v.values())) == gate.EXIT_INCONCLUSIVE


def test_throttle_bits_beyond_the_normal_state(tmp_path, monkeypatch, thresholds) -> None:
    rounds = [(Side().time("capped", _samples(1e-3, 10, r), 1500, 0x4)
               .time("thermal", _samples(1e-3, 10, r + 1), 1500, 0x4)
               .time("stuck", _samples(1e-3, 10, r + 2), 1500, 0x40),
               Side().time("capped", _samples(1e-3, 10, r + 3), 1500, 0x4)
               .time("thermal", _samples(1e-3, 10, r + 4), 1500, 0x44)
               .time("stuck", _samples(1e-3, 10, r + 5), 1500, 0x40)) for r in (0, 20)]
    v = _run(tmp_path, monkeypatch, rounds, thresholds)
    assert v[_name("capped")].verdict == "SAME"  # 0x4 = power cap: the normal state under load
    assert v[_name("thermal")].verdict == "INCONCLUSIVE"
    assert v[_name("thermal")].reason == "throttle bits set: head 0x40"
    assert v[_name("stuck")].verdict == "SAME"  # set everywhere on both sides alike


def test_static_figures_are_exact(tmp_path, monkeypatch, thresholds) -> None:
    regs, occ, lds = ("bench_x.XRegisters.track_value", "bench_x.XOccupancy.track_value",
                      "bench_x.XSharedMem.track_value")
    rounds = [(Side().value(regs, 64).value(occ, 4).value(lds, 16384),
               Side().value(regs, 65).value(occ, 3).value(lds, 16384)) for _ in range(2)]
    v = _run(tmp_path, monkeypatch, rounds, thresholds)
    assert v[regs].verdict == "SLOW" and v[regs].klass == "static"
    assert v[occ].verdict == "SLOW", "lower occupancy is worse"
    assert v[lds].verdict == "SAME"
    assert v[regs].p_value is None  # no statistics for exact figures


def test_suite_wide_false_alarm_control(tmp_path, monkeypatch) -> None:
    raw = json.loads((REPO / "thresholds.json").read_text())
    raw["classes"]["compute"]["min_ratio"] = 0.0  # leave the error control alone at work
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(raw))
    th = gate.Thresholds.load(path)
    n = 300
    rounds = []
    for r in range(2):
        base, head = Side(), Side()
        for i in range(n):
            base.time(f"c{i}", _samples(1e-3, 8, 1000 * r + 2 * i, cov=0.03))
            head.time(f"c{i}", _samples(1e-3, 8, 1000 * r + 2 * i + 1, cov=0.03))
        base.time("real", _samples(1e-3, 8, 9000 + r))
        head.time("real", _samples(1.2e-3, 8, 9100 + r))
        rounds.append((base, head))
    v = _run(tmp_path, monkeypatch, rounds, th)
    nulls = [x for name, x in v.items() if "real" not in name]
    assert sum(x.p_value < th.alpha for x in nulls) >= 1, "uncorrected, some null case alarms"
    assert not [x.case for x in nulls if x.verdict in ("SLOW", "FAST")]
    assert v[_name("real")].verdict == "SLOW"


def test_flagged_cases_need_the_remeasure_to_agree(tmp_path, monkeypatch, thresholds) -> None:
    rounds = [(Side().time("real", _samples(1e-3, 10, r)).time("fluke", _samples(1e-3, 10, r + 1)),
               Side().time("real", _samples(1.2e-3, 10, r + 2))
               .time("fluke", _samples(1.2e-3, 10, r + 3))) for r in (0, 10, 20)]
    first = _run(tmp_path, monkeypatch, rounds, thresholds)
    assert [first[_name(c)].verdict for c in ("real", "fluke")] == ["SLOW", "SLOW"]
    again = (Side().time("real", _samples(1e-3, 10, 40)).time("fluke", _samples(1e-3, 10, 41)),
             Side().time("real", _samples(1.2e-3, 10, 42)).time("fluke", _samples(1e-3, 10, 43)))
    final = _run(tmp_path / "2", monkeypatch, rounds, thresholds, confirm=again)
    assert final[_name("real")].verdict == "SLOW" and final[_name("real")].confirmed
    fluke = final[_name("fluke")]
    assert fluke.verdict == "INCONCLUSIVE" and fluke.confirmed is False
    assert "not confirmed by the re-measure" in fluke.reason


def _write_pair(tmp_path: Path, monkeypatch) -> Path:
    pr = tmp_path / "pr"
    r = pr / "round-01"
    _write_round(r, BASE, Side().time("k", _samples(1e-3, 8, 1)), monkeypatch)
    _write_round(r, HEAD, Side().time("k", _samples(1e-3, 8, 2)), monkeypatch)
    (pr / "gate-state.json").write_text(json.dumps(
        {"base": BASE, "head": HEAD, "machine": MACHINE, "base_how": "given"}))
    return pr


def test_corrupt_or_missing_baseline_exits_3_naming_the_file(tmp_path, monkeypatch,
                                                              capsys) -> None:
    pr = _write_pair(tmp_path, monkeypatch)
    args = ["--repo", str(REPO), "--pr-dir", str(pr), "--no-run", "--out", str(tmp_path / "o")]
    assert gate.main(args) == gate.EXIT_PASS
    base_file = pr / "round-01" / "results" / MACHINE / f"{BASE[:8]}-{ENV}.json"
    base_file.write_text('{"version": 2, "results": {tru')
    assert gate.main(args) == gate.EXIT_INCONCLUSIVE
    err = capsys.readouterr().err
    assert str(base_file) in err and "no baseline" in err and "not valid JSON" in err
    report = json.loads((tmp_path / "o" / "gate.json").read_text())
    assert report["exit_code"] == 3 and str(base_file) in report["error"]
    base_file.unlink()
    assert gate.main(args) == gate.EXIT_INCONCLUSIVE
    assert f"{BASE[:8]}-<env>.json does not exist" in capsys.readouterr().err


def test_missing_head_results_is_a_broken_benchmark(tmp_path, monkeypatch, capsys) -> None:
    pr = _write_pair(tmp_path, monkeypatch)
    head_file = pr / "round-01" / "results" / MACHINE / f"{HEAD[:8]}-{ENV}.json"
    head_file.unlink()
    args = ["--repo", str(REPO), "--pr-dir", str(pr), "--no-run", "--out", str(tmp_path / "o")]
    assert gate.main(args) == gate.EXIT_BROKEN
    assert "no results at head" in capsys.readouterr().err


def test_markdown_is_one_table_worst_first(tmp_path, monkeypatch, thresholds) -> None:
    rounds = [(Side().time("slow", _samples(1e-3, 10, r)).time("fast", _samples(1e-3, 10, r + 1))
               .time("same", _samples(1e-3, 10, r + 2)).time("few", _samples(1e-3, 1, r + 3)),
               Side().time("slow", _samples(1.3e-3, 10, r + 4))
               .time("fast", _samples(0.7e-3, 10, r + 5)).time("same", _samples(1e-3, 10, r + 6))
               .time("few", _samples(1e-3, 1, r + 7))) for r in (0, 10)]
    verdicts = list(_run(tmp_path, monkeypatch, rounds, thresholds).values())
    info = {"label": "sm_90", "base": BASE, "head": HEAD, "base_how": "merge-base with main",
            "machine": MACHINE, "rounds": 2, "tested": 3, "correction": "Benjamini-Hochberg",
            "alpha": 0.01}
    md = gate.markdown(verdicts, gate.exit_code(verdicts), info)
    assert md.startswith(gate.COMMENT_MARKER)
    assert "**REGRESSION** (exit 1): 1 slower, 1 faster, 1 same, 1 inconclusive of 4 cases" in md
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    order = [re.search(r"\('(\w+)'\)", row).group(1) for row in rows]
    assert order == ["slow", "few", "same", "fast"]
    assert md.count("| case |") == 1
    assert "1 ms" in rows[0] and "1.3 ms" in rows[0]
    data = gate.report_json(verdicts, 1, info)
    assert data["cases"][0]["verdict"] == "SLOW" and data["exit_code"] == 1


def test_thresholds_errors_name_the_file_and_field(tmp_path) -> None:
    path = tmp_path / "t.json"
    raw = json.loads((REPO / "thresholds.json").read_text())
    raw["rules"][1]["match"] = "("
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"t\.json: rules\[1\]: bad regex"):
        gate.Thresholds.load(path)
    raw["rules"] = [{"match": "^only", "class": "compute"}]
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="no rule matches case 'other'"):
        gate.Thresholds.load(path).rule_for("other")
    raw["rules"] = [{"match": ".*", "class": "warp-bound"}]
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="class 'warp-bound' is not one of"):
        gate.Thresholds.load(path)


def test_every_ops_time_suite_gets_its_ops_bound_class(thresholds) -> None:
    from kernels.registry import get_op, op_names

    checked = 0
    for name in op_names():
        op = get_op(name)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if getattr(cls, "op", None) != name or not hasattr(cls, "track_time"):
                continue
            for case in cls.params[0]:
                full = f"bench_{name}.{cls.__name__}.track_time({case!r}, 'fp16', 'triton')"
                _, klass = thresholds.rule_for(full)
                expected = "bandwidth" if "decode" in case else op.bound
                assert klass.name == expected, f"{full}: thresholds say {klass.name}"
                checked += 1
    assert checked > 0


def test_derived_config_keeps_pr_results_out_of_the_history(tmp_path) -> None:
    conf = gate.load_project_conf(REPO / "asv.conf.json")
    derived = gate.derived_config(conf, REPO, tmp_path / "round-01")
    assert derived["results_dir"] == str(tmp_path / "round-01" / "results")
    assert derived["env_dir"] == str(REPO / ".asv" / "env")  # environments are shared
    assert derived["repo"] == str(REPO)
    assert all("{conf_dir}" not in c for c in derived["install_command"])
    with pytest.raises(gate.GateError, match="overlaps the published results"):
        gate.guard_results_dir(REPO / ".asv" / "results", conf, REPO)
    gate.guard_results_dir(REPO / ".asv" / "pr-results", conf, REPO)


def test_help_documents_the_exit_codes() -> None:
    text = gate.build_parser().format_help()
    for line in ("2  a benchmark broke", "1  regression", "3  inconclusive or no baseline",
                 "0  pass"):
        assert line in text


def _process_record(samples: list[float], clock: float, bits: int, at: float) -> dict:
    windows = [WindowStats(n_readings=3, sm_clock_mhz_median=clock, throttle_bits_or=bits)
               for _ in samples]
    m = Measurement(samples=samples, number=1, mode="events", reps=10, calls_per_rep=1,
                    estimate_s=samples[0], warmup_trials=3, warmup_s=0.3, settled=True,
                    telemetry_backend="nvml", telemetry_reason="", windows=windows)
    return {"measurement": m.as_record(), "recorded_at": at}


def test_records_of_pooled_rounds_give_every_sample_its_clock(tmp_path, monkeypatch) -> None:
    """asv rounds=2: two processes, two records, asv's samples are both lists in order; a
    record of an earlier run whose samples asv replaced is passed over."""
    monkeypatch.setenv("KPERF_MACHINE", MACHINE)
    monkeypatch.setenv("ASV_COMMIT", BASE)
    monkeypatch.setenv("ASV_ENV_NAME", ENV)
    first, second, stale = [1.0, 1.1, 1.2], [2.0, 2.1], [9.0, 9.1]
    for samples, clock, at in ((stale, 1000.0, 1.0), (first, 1400.0, 2.0), (second, 1500.0, 3.0)):
        rec = _process_record(samples, clock, 0x4, at)
        record.write_record(TIME, {"case": "c"}, {"kind": "time", **rec}, root=tmp_path)
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 3, "one record per process, none overwritten"
    meta = {TIME: {"param_names": ["case"]}}
    recs = gate.read_round_records(tmp_path, BASE, meta)[(ENV, _name("c"))]
    assert [r["recorded_at"] for r in recs] == [1.0, 2.0, 3.0]

    pooled = gate.RoundData("ok", samples=first + second)
    gate.attach_record(pooled, recs)
    assert pooled.clocks == [1400.0] * 3 + [1500.0] * 2
    assert pooled.throttle == [0x4] * 5 and pooled.backend == "nvml"

    unexplained = gate.RoundData("ok", samples=[*first, 7.0])
    gate.attach_record(unexplained, recs)
    assert unexplained.clocks is None  # a sample no record explains: no clocks at all
