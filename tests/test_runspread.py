"""tools/lab/runspread.py: the A/A spread of two asv runs of one commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kperf.site.publish import series_thresholds
from tools.lab import runspread

COLUMNS = ["result", "params", "samples"]
GEMM = "bench_gemm.GemmTime.track_time"
NORM = "bench_rmsnorm.RmsnormTime.track_time"


def results(path: Path, gemm: list, norm: float | None) -> Path:
    rows = {GEMM: [gemm, [["'square-8192'"], ["'tilelang'", "'triton'"]], None],
            NORM: [[norm], [["'hidden'"], ["'triton'"]], None],
            "bench_gemm.GemmRegisters.track_value": [[168.0], [["'sm_90a'"]], None]}
    path.write_text(json.dumps({"version": 2, "env_name": "env", "result_columns": COLUMNS,
                                "results": rows}))
    return path


def test_two_runs_give_each_case_its_ratio_and_each_suite_its_spread(tmp_path: Path,
                                                                     capsys) -> None:
    first = results(tmp_path / "a.json", [1.80e-3, 1.75e-3], 70.0e-6)
    second = results(tmp_path / "b.json", [1.818e-3, 1.75e-3], None)  # RMSNorm failed
    by_case = runspread.ratios(runspread.values(first), runspread.values(second))
    assert list(by_case) == [f"{GEMM}('square-8192', 'tilelang')",
                             f"{GEMM}('square-8192', 'triton')"]  # only what both ran
    assert by_case[f"{GEMM}('square-8192', 'tilelang')"] == pytest.approx(1.01)
    assert runspread.main([str(first), str(second), "--flag", "0.005"]) == 0
    out = capsys.readouterr().out
    assert "| bench_gemm | 2 | 0.50% | 1.00% | 1 |" in out
    assert "- bench_gemm.GemmTime.track_time('square-8192', 'tilelang'): x1.0100" in out


def test_unreadable_or_disjoint_runs_are_an_error_naming_the_file(tmp_path: Path,
                                                                  capsys) -> None:
    good = results(tmp_path / "a.json", [1e-3, 1e-3], 1e-4)
    (tmp_path / "cut.json").write_text('{"version": 2, "results": {')
    assert runspread.main([str(good), str(tmp_path / "cut.json")]) == 2
    assert "cut.json" in capsys.readouterr().err
    empty = results(tmp_path / "b.json", [None, None], None)
    assert runspread.main([str(good), str(empty)]) == 2
    assert "no timed case ran in both" in capsys.readouterr().err


def test_each_class_gets_its_spread_in_time_and_energy_and_what_the_history_flags(
        tmp_path: Path, capsys) -> None:
    """An unchanged GEMM 3% slower and an RMSNorm whose energy per call moved +11.5%: per
    class, the median |ratio - 1| and whether asv.conf.json's threshold flags it."""
    from kperf.gate.asvio import asv_threshold

    from .conftest import REPO

    def run(path: Path, gemm_s: float, norm_j: float) -> Path:
        rows = {GEMM: [[gemm_s], [["'square-8192'"], ["'fp16'"], ["'triton'"]], None],
                NORM: [[70e-6], [["'llama3-8b.hidden'"], ["'bf16'"], ["'triton'"]], None],
                "bench_rmsnorm.RmsnormEnergy.track_energy": [
                    [norm_j], [["'llama3-8b.hidden'"], ["'bf16'"], ["'triton'"]], None]}
        path.write_text(json.dumps({"version": 2, "env_name": "env",
                                    "result_columns": COLUMNS, "results": rows}))
        return path

    first, second = run(tmp_path / "a.json", 1.0e-3, 0.0407), run(tmp_path / "b.json",
                                                                   1.03e-3, 0.0454)
    energy = runspread.ratios(runspread.values(first, runspread.ENERGY),
                              runspread.values(second, runspread.ENERGY))
    assert list(energy) == ["bench_rmsnorm.RmsnormEnergy.track_energy('llama3-8b.hidden', "
                            "'bf16', 'triton')"]
    assert runspread.main([str(first), str(second)]) == 0
    out = capsys.readouterr().out
    table, problem = series_thresholds(REPO)  # what kperf publish gives asv
    assert not problem
    gemm = f"{GEMM}('square-8192', 'fp16', 'triton')"
    (norm_energy,) = energy
    gemm_flagged = int(asv_threshold(table, gemm) < 1.03e-3 / 1.0e-3 - 1)
    assert f"| compute | time | 1 | 3.00% | 3.00% | {gemm_flagged} |" in out
    flagged = int(energy[norm_energy] - 1 > asv_threshold(table, norm_energy))
    assert f"| bandwidth | energy | 1 | 11.55% | 11.55% | {flagged} |" in out
    assert "| bandwidth | time | 1 | 0.00% | 0.00% | 0 |" in out


def write_record(folder: Path, name: str, samples: list[float], energy_j: float | None,
                 recorded_at: float, kind: str = "time", case: str = "llama3-8b.hidden",
                 mode: str | None = None) -> None:
    """One harness record as kperf/suites/timed.py writes it (the fields read here)."""
    bench = folder / "bench_rmsnorm.RmsnormTime.track_time"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / f"{name}.json").write_text(json.dumps({
        "benchmark": "bench_rmsnorm.RmsnormTime.track_time", "kind": kind,
        "params": {"backend": "triton", "case": case, "dtype": "bf16"},
        "recorded_at": recorded_at, "energy_per_call_j": energy_j,
        "measurement": {"samples": samples, **({"mode": mode} if mode else {})}},
        sort_keys=True))


def test_two_records_folders_give_the_spread_of_each_timing_method(tmp_path: Path,
                                                                  capsys) -> None:
    """Graph-replayed short kernels, long ones timed by events, and a case whose method
    changed between the runs each get their own row, with how many read faster in the
    second run."""
    runs = {"first": tmp_path / "first", "second": tmp_path / "second"}
    cases = {"short-a": ("graph", "graph", 7.0, 6.8), "short-b": ("graph", "graph", 9.0, 8.9),
             "long": ("events", "events", 70.0, 70.07),
             "crossed": ("graph", "events", 10.8, 15.9)}
    for i, (case, (mode_1, mode_2, us_1, us_2)) in enumerate(cases.items()):
        write_record(runs["first"], case, [us_1 * 1e-6], 0.01, 1.0 + i, case=case,
                     mode=mode_1)
        write_record(runs["second"], case, [us_2 * 1e-6], 0.01, 1.0 + i, case=case,
                     mode=mode_2)
    methods = runspread.record_methods(runs["first"])
    assert methods[f"{NORM}('long', 'bf16', 'triton')"] == "events"
    assert runspread.main([str(runs["first"]), str(runs["second"])]) == 0
    out = capsys.readouterr().out
    assert "| graph | 2 | 1.98% | 2.86% | 2 | 2 |" in out  # the mean of 2.86% and 1.11%
    assert "| events | 1 | 0.10% | 0.10% | 0 | 0 |" in out
    assert "| graph -> events | 1 | 47.22% | 47.22% | 1 | 0 |" in out


def test_a_run_cut_off_before_its_results_file_is_read_from_its_records(tmp_path: Path,
                                                                       capsys) -> None:
    """An asv step cut off by its limit keeps only the harness's records: a record gives
    the median of its samples and its energy, named as asv names the case; of a case
    measured twice, the later record."""
    records = tmp_path / "abcd1234-env"
    write_record(records, "early", [90e-6, 91e-6, 92e-6], 0.05, recorded_at=100.0)
    write_record(records, "late", [70e-6, 71e-6, 75e-6], 0.04, recorded_at=200.0)
    write_record(records, "other", [1.0], 1.0, recorded_at=300.0, kind="compile")
    name = "('llama3-8b.hidden', 'bf16', 'triton')"
    assert runspread.values(records) == {f"{NORM}{name}": 71e-6}
    assert runspread.values(records, runspread.ENERGY) == {
        f"bench_rmsnorm.RmsnormEnergy.track_energy{name}": 0.04}
    second = tmp_path / "b.json"
    second.write_text(json.dumps({"version": 2, "env_name": "env", "result_columns": COLUMNS,
                                  "results": {NORM: [[71.5e-6], [["'llama3-8b.hidden'"],
                                                                  ["'bf16'"], ["'triton'"]],
                                                     None]}}))
    assert runspread.main([str(records), str(second)]) == 0
    assert "| bench_rmsnorm | 1 | 0.70% | 0.70% | 0 |" in capsys.readouterr().out
    (records / "bench_rmsnorm.RmsnormTime.track_time" / "cut.json").write_text('{"kind": ')
    assert runspread.main([str(records), str(second)]) == 2
    assert "cut.json: not a record" in capsys.readouterr().err


def test_a_commit_run_twice_compares_its_first_run_with_its_last(tmp_path: Path,
                                                                  capsys) -> None:
    """One records folder holds both runs of a commit run again: each case measured
    twice gives last over first; a case measured once (the rerun cut off) is left out
    rather than read as an exact match."""
    records = tmp_path / "abcd1234-env"
    for i, (case, first_us, last_us) in enumerate([("a", 8.73, 8.34), ("b", 70.0, 70.07)]):
        write_record(records, f"{case}-1", [first_us * 1e-6], 0.02, 10.0 + i, case=case,
                     mode="graph")
        write_record(records, f"{case}-2", [last_us * 1e-6], 0.02, 100.0 + i, case=case,
                     mode="graph")
    write_record(records, "once", [5e-6], 0.01, 50.0, case="once", mode="graph")
    assert runspread.main([str(records)]) == 0
    out = capsys.readouterr().out
    assert "| bench_rmsnorm | 2 |" in out and f"{NORM}('a', 'bf16', 'triton'): x0.9553" in out
    assert "| graph | 2 | 2.28% | 4.47% | 1 | 1 |" in out  # the mean of 4.47% and 0.10%
    assert runspread.main([str(tmp_path / "none.json")]) == 2
    assert "with one argument, give a records folder" in capsys.readouterr().err
