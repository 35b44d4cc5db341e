"""The gate over asv's own files: PR folders of the previous gate (asv rounds with records)
decided again with today's model, and the faults of those files (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from kperf.core import record
from kperf.core.telemetry import WindowStats
from kperf.core.timing import Measurement
from kperf.gate import asvio, cli
from kperf.gate.errors import EXIT_GATE_ERROR

from .conftest import synthetic_project, synthetic_thresholds

REPO = Path(__file__).resolve().parent.parent
MACHINE, ENV = "synthetic", "virtualenv-py3.11"
BASE, HEAD = "a" * 40, "b" * 40
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]
TIME = "bench_x.XTime.track_time"


def _name(case: str) -> str:
    return f"{TIME}({case!r})"


def _samples(level: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in level * (1 + 0.002 * rng.standard_normal(10))]


def _write_side(round_dir: Path, commit: str, levels: dict[str, float], clock: float,
                seed: int, monkeypatch) -> None:
    """One side of one asv round, as the previous gate left it: results and records."""
    names = sorted(levels)
    samples = [_samples(levels[n], seed + i) for i, n in enumerate(names)]
    row = [[float(np.median(s)) for s in samples], [[repr(n) for n in names]], "v1", 0, 1.0,
           None, None, None, None, [1] * len(names), [10] * len(names), samples]
    path = round_dir / "results" / MACHINE / f"{commit[:8]}-{ENV}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 2, "commit_hash": commit, "env_name": ENV,
                                "result_columns": COLUMNS, "results": {TIME: row}}))
    (round_dir / "results" / "benchmarks.json").write_text(json.dumps(
        {TIME: {"param_names": ["case"], "unit": "seconds"}, "version": 2}))
    for var, value in (("KPERF_MACHINE", MACHINE), ("ASV_COMMIT", commit),
                       ("ASV_ENV_NAME", ENV)):
        monkeypatch.setenv(var, value)
    for name, s in zip(names, samples, strict=True):
        windows = [WindowStats(n_readings=3, sm_clock_mhz_median=clock, throttle_bits_or=4,
                               power_w_mean=600.0) for _ in s]
        m = Measurement(samples=s, number=1, mode="events", reps=10, calls_per_rep=1,
                        estimate_s=s[0], warmup_trials=3, warmup_s=0.3, settled=True,
                        telemetry_backend="nvml", telemetry_reason="", windows=windows)
        record.write_record(TIME, {"case": name}, {"kind": "time", "recorded_at": 1.0,
                                                   "measurement": m.as_record()},
                            root=round_dir / "records")


def _old_pr_dir(root: Path, monkeypatch, rounds: int = 4) -> Path:
    pr = root / "pr"
    for r in range(1, rounds + 1):
        round_dir = pr / f"round-{r:02d}"
        _write_side(round_dir, BASE, {"same": 1e-3, "slower": 2e-3}, 1500.0, 10 * r,
                    monkeypatch)
        _write_side(round_dir, HEAD, {"same": 1e-3, "slower": 2.2e-3}, 1500.0, 10 * r + 5,
                    monkeypatch)
    (pr / "gate-state.json").write_text(json.dumps(
        {"base": BASE, "head": HEAD, "machine": MACHINE, "base_how": "given",
         "hash_length": 8}))
    return pr


def test_an_older_gates_rounds_are_decided_again(tmp_path: Path, monkeypatch) -> None:
    pr = _old_pr_dir(tmp_path, monkeypatch)
    th = synthetic_thresholds()
    verdicts = {v.case: v for v in cli.decide(pr, cli.read_state(pr), th)}
    slower = verdicts[_name("slower")]
    assert slower.ratio == pytest.approx(1.10, rel=0.01)
    assert slower.rounds == 3, "decided at the first look, as the looks replay"
    assert slower.candidate == "SLOW", "flagged; stored rounds hold no re-measure"
    assert slower.clock_base_mhz == 1500.0, "clocks come from the records"
    assert verdicts[_name("same")].verdict == "SAME"


def test_records_of_pooled_rounds_give_every_sample_its_clock(tmp_path, monkeypatch) -> None:
    """asv rounds=2: two processes, two records, asv's samples are both lists in order; a
    record of an earlier run whose samples asv replaced is passed over."""
    for var, value in (("KPERF_MACHINE", MACHINE), ("ASV_COMMIT", BASE), ("ASV_ENV_NAME", ENV)):
        monkeypatch.setenv(var, value)
    first, second, stale = [1.0, 1.1, 1.2], [2.0, 2.1], [9.0, 9.1]
    for samples, clock, at in ((stale, 1000.0, 1.0), (first, 1400.0, 2.0),
                               (second, 1500.0, 3.0)):
        windows = [WindowStats(n_readings=3, sm_clock_mhz_median=clock, throttle_bits_or=4)
                   for _ in samples]
        m = Measurement(samples=samples, number=1, mode="events", reps=10, calls_per_rep=1,
                        estimate_s=samples[0], warmup_trials=3, warmup_s=0.3, settled=True,
                        telemetry_backend="nvml", telemetry_reason="", windows=windows)
        record.write_record(TIME, {"case": "c"}, {"kind": "time", "recorded_at": at,
                                                  "measurement": m.as_record()}, root=tmp_path)
    assert len(list(tmp_path.rglob("*.json"))) == 3, "one record per process, none overwritten"
    recs = asvio.read_records(tmp_path, BASE, {TIME: {"param_names": ["case"]}})[(ENV,
                                                                                 _name("c"))]
    pooled = asvio.Block("base", 1, samples=first + second)
    asvio.attach_records(pooled, recs)
    assert pooled.clocks == [1400.0] * 3 + [1500.0] * 2 and pooled.throttle_bits == 4
    assert pooled.method == "events"  # how both records timed it
    unexplained = asvio.Block("base", 1, samples=[*first, 7.0])
    asvio.attach_records(unexplained, recs)
    assert unexplained.clocks == [], "a sample no record explains: no clocks at all"


def _repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "asv.conf.json").write_text(json.dumps(
        {"version": 1, "project": "p", "repo": ".", "branches": ["main"],
         "results_dir": ".asv/results", "html_dir": "html"}))
    synthetic_project(repo)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    return repo


@pytest.mark.parametrize("damage", ["record", "benchmarks.json", "results"])
def test_a_truncated_file_is_the_gates_own_failure_naming_it(tmp_path: Path, monkeypatch,
                                                             damage: str) -> None:
    repo = _repo(tmp_path)
    pr = _old_pr_dir(repo / ".asv", monkeypatch, rounds=3)
    target = {"record": next((pr / "round-02" / "records").rglob("*.json")),
              "benchmarks.json": pr / "round-02" / "results" / "benchmarks.json",
              "results": next((pr / "round-02" / "results" / MACHINE).glob("bbbbbbbb-*"))
              }[damage]
    target.write_text(target.read_text()[:40])
    code = cli.main(["--repo", str(repo), "--no-run", "--pr-dir", str(pr)])
    report = json.loads((pr / "gate.json").read_text())
    assert code == EXIT_GATE_ERROR and report["status"] == "GATE ERROR"
    assert str(target) in report["error"], report["error"]


@pytest.mark.parametrize("kept", [".asv/records", ".asv/results", "html", "."])
def test_the_pr_folder_is_never_the_history(tmp_path: Path, kept: str, capsys) -> None:
    repo = _repo(tmp_path)
    (repo / kept / "keep.json").parent.mkdir(parents=True, exist_ok=True)
    (repo / kept / "keep.json").write_text("{}")
    code = cli.main(["--repo", str(repo), "--pr-dir", str(repo / kept)])
    err = capsys.readouterr().err
    assert code == EXIT_GATE_ERROR, err
    assert "overlaps" in err or "is or holds" in err, err
    assert (repo / kept / "keep.json").read_text() == "{}", "nothing deleted"
    assert not (repo / kept / "gate.json").exists(), "no report written into it either"


def test_the_telemetry_page_reads_throttle_bits_as_the_gate_does() -> None:
    from kperf.site import telemetry_pages

    th = synthetic_thresholds()
    assert telemetry_pages.environment_bits() == th.environment_bits
    assert th.environment_bits["nvml"] == 0xEA


def _row(round_: int) -> str:
    return json.dumps({"case": "a", "env": "", "side": "base", "round": round_,
                       "samples": [1e-3]})


def test_block_log_drops_a_cut_off_last_line_and_refuses_a_corrupt_one(tmp_path) -> None:
    from kperf.gate.blocks import BlockLog
    from kperf.gate.errors import GateError

    path = tmp_path / "blocks.jsonl"
    path.write_text(f"{_row(1)}\n{_row(2)}\n{_row(3)[:20]}")
    assert [row["round"] for row in BlockLog(path).read()] == [1, 2]  # measured again
    path.write_text(f"{_row(1)}\n{_row(2)[:-3]}\n{_row(3)}\n")  # corrupt, not cut off
    with pytest.raises(GateError, match=r"blocks\.jsonl:2: corrupt line"):
        BlockLog(path).read()


def test_a_block_line_cut_by_a_full_disk_is_cut_away_before_the_next_append(tmp_path) -> None:
    """A full disk (or a kill) leaves blocks.jsonl's last line without its end: --resume
    must not append after it (the two would make one corrupt line, and every later read
    fail), and a log that an older gate already appended to so is still read."""
    from kperf.gate.blocks import BlockLog
    from kperf.gate.model import Block

    path = tmp_path / "blocks.jsonl"
    path.write_text(f"{_row(1)}\n{_row(2)[:25]}")
    log = BlockLog(path)
    log.append({"name": "a"}, Block("head", 2, samples=[1e-3]), {})
    assert path.read_text().splitlines()[0] == _row(1)
    assert [(r["round"], r["side"]) for r in log.read()] == [(1, "base"), (2, "head")]
    assert len(path.read_text().splitlines()) == 2, "the cut line is gone, not hidden"
    path.write_text(f"{_row(1)}\n{_row(2)[:25]}{_row(3)}\n{_row(4)}\n")  # an older gate's
    assert [r["round"] for r in BlockLog(path).read()] == [1, 3, 4]


@pytest.mark.parametrize(("field", "value"), [("round", 1_000_000_000), ("round", 2.0),
                                              ("side", "../x"), ("samples", [-1.0])])
def test_a_block_line_outside_the_schema_is_named_with_its_field(tmp_path, field: str,
                                                                 value: object) -> None:
    """``"round": 1000000000`` made --no-run replay a billion looks (it never ended)."""
    from kperf.config import ConfigError
    from kperf.gate.blocks import BlockLog

    path = tmp_path / "blocks.jsonl"
    row = {**json.loads(_row(1)), field: value}
    path.write_text(f"{_row(1)}\n{json.dumps(row)}\n")
    with pytest.raises(ConfigError, match=rf"blocks\.jsonl:2: field /{field}"):
        BlockLog(path).read()
