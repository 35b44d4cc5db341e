"""What a long run tells its user: an ETA from asv's progress, a summary at the end, and
how each case's kernel came to be (compiled or from the cache keyed by kernel source)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.history.asvrun import ETA_EVERY_S, Eta
from kperf.history.bench import summary
from kperf.suites.case import cache_files, compile_note


def test_eta_from_asvs_progress_lines() -> None:
    now = [0.0]
    eta = Eta(clock=lambda: now[0])
    now[0] = ETA_EVERY_S + 1
    assert eta.update("· Creating environments") is None
    assert eta.update("[ 25.00%] ··· bench_gemm.GemmTime.track_time   ok") == (
        "kperf: 25% of the run done after 31 s; about 1 min 33 s left")
    now[0] += 1
    assert eta.update("[ 50.00%] ··· x") is None, "at most one line every ETA_EVERY_S"
    now[0] = 10 * 60
    assert eta.update("[100.00%] ··· x").endswith("about 0 s left")


def test_summary_counts_every_case_of_the_runs_commits(tmp_path: Path) -> None:
    columns = ["result", "params", "samples"]
    rows = {"b.T.track_time": [[1e-3, None, float("nan")], [["'a'", "'b'", "'c'"]],
                               [[1e-3], None, None]],
            "b.R.track_value": [64.0, [], None]}
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "commit_hash": "abcdef12" * 5, "env_name": "env",
         "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 90.0)
    assert text.startswith("kperf: 4 cases over 1 commit(s): 2 ok, 1 failed, 1 skipped;")
    assert "1.5 min" in text and "30.0 s a case run" in text
    rows["b.T.track_time"][1] = [["'a'"], ["'fp16'"], ["'triton'", "'tilelang'", "'torch'"]]
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "commit_hash": "abcdef12" * 5, "env_name": "env",
         "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 90.0)
    assert "1 skipped (1 the torch baseline (--baseline every): timed only where they" in text
    rows["b.C.track_compile"] = [[float("nan")] * 2, [["'gfx942'", "'sm_90a'"]], [None] * 2]
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "commit_hash": "abcdef12" * 5, "env_name": "env",
         "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 90.0)
    assert ("3 skipped (1 the torch baseline (--baseline every) and 2 cold compiles "
            "(--compile every): timed only where they changed)") in text
    assert "TileLang or Triton" not in text  # --kernels every: a kernel's skip is another's
    rows["b.T.track_time"][0] = [1e-3, float("nan"), float("nan")]  # tilelang skipped too
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "commit_hash": "abcdef12" * 5, "env_name": "env",
         "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 90.0, kernels="changed")
    assert ("2 cold compiles (--compile every) and 1 TileLang or Triton cases (--kernels "
            "every): timed only where they changed") in text


def test_compile_notes_and_the_cache_count(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    assert cache_files() == 0
    (tmp_path / "triton" / "k1").mkdir(parents=True)
    (tmp_path / "triton" / "k1" / "kernel.cubin").write_bytes(b"x")
    assert cache_files() == 1
    assert compile_note(True, 3, 2.5).startswith("compiled (3 new cache files")
    assert compile_note(True, 0, 0.3).startswith("from the compile cache")
    assert compile_note(False, 0, 0.0) == "already built in this worker"


def test_summary_counts_only_what_this_run_measured(tmp_path: Path) -> None:
    """asv merges a run into the commit's results file: a second run of a subset must not
    count the first run's cases (it said "96 cases ... 0.9 s a case" for 36 on the H200)."""
    columns = ["result", "params", "samples", "started_at"]
    params = [["'a'", "'b'"], ["'fp16'"]]
    rows = {"b.GemmEnergy.track_energy": [[1.0, 2.0], params, None, 2_000_000.0],
            "b.GemmTime.track_time": [[1e-3, None], params, [[1e-3], None], 2_000_050.0],
            "b.GemmCompile.track_compile": [[3.0, 3.0], params, None, 1_000_000.0]}
    (tmp_path / "abcdef12-env.json").write_text(json.dumps(
        {"version": 2, "commit_hash": "abcdef12" * 5, "env_name": "env",
         "result_columns": columns, "results": rows}))
    text = summary(tmp_path, ["abcdef1234"], 60.0, since=1_500.0, regexes=[r"\('a'"])
    assert text.startswith("kperf: 2 cases over 1 commit(s): 2 ok, 0 failed, 0 skipped")
    assert "30.0 s a case run" in text
    everything = summary(tmp_path, ["abcdef1234"], 60.0, since=1_500.0)
    assert everything.startswith("kperf: 4 cases over 1 commit(s): 3 ok, 1 failed")


def _suite_meta() -> dict:
    cases = [["'c1'", "'c2'", "'c3'"], ["'fp16'"], ["'tilelang'", "'triton'"]]
    static = [["'gfx942'", "'sm_90a'"], ["'fp16'"], ["'tilelang'", "'triton'"]]
    return {"bench_x.XCompile.track_compile": {"params": static},
            "bench_x.XEnergy.track_energy": {"params": cases},
            "bench_x.XOccupancy.track_value": {"params": static},
            "bench_x.XRegisters.track_value": {"params": static},
            "bench_x.XTime.track_time": {"params": cases},
            "version": 2}


def test_expected_seconds_weigh_each_benchmark_by_its_cases_and_kind() -> None:
    from kperf.history.asvrun import CASE_SECONDS, expected_seconds

    out = expected_seconds(_suite_meta(), [])
    assert list(out) == sorted(out) and "version" not in out
    assert out["bench_x.XEnergy.track_energy"] == 6 * CASE_SECONDS["measure"]
    assert out["bench_x.XTime.track_time"] == 6 * CASE_SECONDS["reuse"]
    assert out["bench_x.XCompile.track_compile"] == 4 * CASE_SECONDS["compile"]
    assert out["bench_x.XOccupancy.track_value"] == 4 * CASE_SECONDS["static"]
    assert out["bench_x.XRegisters.track_value"] == 4 * CASE_SECONDS["static"]
    chosen = expected_seconds(_suite_meta(), [r"XTime\.track_time\('c1'"])
    assert chosen == {"bench_x.XTime.track_time": 2 * CASE_SECONDS["measure"]}


def test_eta_weighs_a_long_gpu_suite_and_speaks_while_it_runs(tmp_path: Path) -> None:
    """asv's percentages count a 6-case GPU suite like a 4-case static one; the ETA must
    not (the H200 run said 10 min 27 s left with 10 s to go), and it must say something
    during a long benchmark, when asv prints nothing."""
    from kperf.history.asvrun import CASE_SECONDS

    meta = tmp_path / "benchmarks.json"
    meta.write_text(json.dumps(_suite_meta()))
    now = [0.0]
    eta = Eta(clock=lambda: now[0], benchmarks_json=meta)
    eta.update("· Running 5 total benchmarks (1 commits * 1 environments * 5 benchmarks)")
    compile_s, energy_s = 4 * CASE_SECONDS["compile"], 6 * CASE_SECONDS["measure"]
    total = sum(expected_seconds_of(meta).values())
    now[0] = compile_s * 2  # the compile suite took twice its estimate: the pace is 2
    line = "[ 20.00%] ··· bench_x.XCompile.track_compile                ok"
    assert eta.update(line) == (
        f"kperf: 1 of 5 benchmarks done after {_m(now[0])}; about "
        f"{_m((total - compile_s) * 2)} left")
    now[0] += ETA_EVERY_S  # into the energy suite (48 s at that pace)
    assert energy_s * 2 > ETA_EVERY_S
    assert eta.note() == (f"kperf: 1 of 5 benchmarks done after {_m(now[0])}; about "
                          f"{_m((total - compile_s) * 2 - ETA_EVERY_S)} left")
    assert eta.note() is None, "at most one note every ETA_EVERY_S"
    for name in ("XEnergy.track_energy", "XOccupancy.track_value",
                 "XRegisters.track_value", "XTime.track_time"):
        now[0] += ETA_EVERY_S
        eta.update(f"[ 90.00%] ··· bench_x.{name}   ok")
    assert eta.note(force=True).endswith("5 of 5 benchmarks done after "
                                         f"{_m(now[0])}; about 0 s left")


def test_a_skipped_compile_suite_does_not_set_the_pace(tmp_path: Path) -> None:
    """At a day's commit the compile suite is skipped (0.2 s against 44 s expected): taken
    as the pace, it said "about 0 s left" with a minute to go. The ETA keeps the plan's
    pace until the benchmarks done have taken PACE_EVIDENCE_S."""
    from kperf.history.asvrun import CASE_SECONDS, PACE_EVIDENCE_S

    meta = tmp_path / "benchmarks.json"
    meta.write_text(json.dumps(_suite_meta()))
    now = [0.0]
    eta = Eta(clock=lambda: now[0], benchmarks_json=meta)
    eta.update("· Running 5 total benchmarks (1 commits * 1 environments * 5 benchmarks)")
    total = sum(expected_seconds_of(meta).values())
    compile_s = 4 * CASE_SECONDS["compile"]
    now[0] = 0.2
    eta.update("[ 20.00%] ··· bench_x.XCompile.track_compile                ok")
    assert PACE_EVIDENCE_S > 0.2
    now[0] = 10.2  # 10 s into the energy suite
    assert eta.note(force=True) == (
        f"kperf: 1 of 5 benchmarks done after 10 s; about {_m(total - compile_s - 10.0)} left")


def expected_seconds_of(meta: Path) -> dict[str, float]:
    from kperf.history.asvrun import expected_seconds

    return expected_seconds(json.loads(meta.read_text()), [])


def _m(seconds: float) -> str:
    from kperf.history.asvrun import _minutes

    return _minutes(seconds)


def test_every_asv_run_tells_the_suites_what_was_selected(tmp_path: Path, monkeypatch) -> None:
    """kperf.history.bench and the stack matrix both go through run_asv: the suites
    read the -b regexes from KPERF_BENCH_REGEX to compile ahead only what will run."""
    import subprocess

    from kperf.history import asvrun

    assert asvrun.bench_regexes(["run", "-b", "x", "--bench", "y", "--bench=z", "-E"]) == [
        "x", "y", "z"]
    seen = {}

    def fake_run(cmd, **kw):
        seen.update(kw["env"])
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(asvrun.subprocess, "run", fake_run)
    asvrun.run_asv(["run", "-b", r"GemmTime\.track_time\('square"], {"A": "1"}, tmp_path,
                   log=tmp_path / "asv.log")
    assert json.loads(seen["KPERF_BENCH_REGEX"]) == [r"GemmTime\.track_time\('square"]
    assert seen["A"] == "1"


@pytest.mark.parametrize(("command", "imported"), [("discover", False), ("run_server", True)])
def test_asvs_discovery_does_not_import_the_stack(command: str, imported: bool) -> None:
    """asv discovers the suites in a process of its own at every run, and that process only
    reads names and parameters: torch, Triton and TileLang are imported in the fork server
    (KPERF_PREIMPORT), where the benchmarks run, not there (4.5 -> 0.1 s on the CPU
    machine, more with a GPU stack)."""
    from .conftest import REPO

    probe = (f"import sys; sys.argv = ['benchmark.py', {command!r}]\n"
             "import importlib, pkgutil, benchmarks\n"
             "for m in pkgutil.iter_modules(benchmarks.__path__):\n"
             "    importlib.import_module('benchmarks.' + m.name)\n"
             "print(sorted(n for n in ('torch', 'triton', 'tilelang') if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=300,
                         env={**os.environ, "KPERF_PREIMPORT": "torch,triton,tilelang"})
    last = out.stdout.strip().splitlines()[-1]
    assert last == ("['tilelang', 'torch', 'triton']" if imported else "[]"), out.stdout
