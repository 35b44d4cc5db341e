"""A small results history for the site's tests (tests/test_site*.py).

Real part: a temporary clone gets two more commits (the GEMM tile change of
tests/test_asv_commits.py, then a commit whose subject is hostile HTML), and ``asv run``
measures two CPU-side static figures at all three commits on machine ``kperf-test-cpu``.

Synthetic part, labelled as such everywhere it shows (machine ``synthetic-fixture``, GPU
"synthetic fixture, not a measurement"): GPU-suite results in asv's format and records
for GEMM and softmax at the same commits, records of schema 1 at the first two commits
and schema 2 (energy, power limit) at the last, a failed and a skipped case, a corrupt
record and a record of an unknown schema, and one kept gate report. No figure of it was
measured; nothing here runs on a GPU.

Codegen part, real: the records of the CodeSize and Compile suites in
tests/data/codegen-records.json (tests/codegen_fixture.py says how they were made), placed
at the last commit on ``kperf-test-cpu``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf.history.asvrun import asv_env, run_asv
from kperf.machine import write_machine_file
from kperf.site.data import TIME_PARAMS
from tests import codegen_fixture
from tests.test_asv_commits import _edit, _git

TOOLCHAIN_ROOT = Path(__file__).resolve().parent.parent / ".cache" / "rocm-toolchain"
CPU_MACHINE = "kperf-test-cpu"
GPU_MACHINE = "synthetic-fixture"
GPU_NAME = "synthetic fixture, not a measurement"
ENV = "virtualenv-py3.11"
HOSTILE = '<script>window.__kperf_xss=1</script> & "quoted" <b>subject</b>'
GEMM = "bench_gemm.GemmTime.track_time"
SOFTMAX = "bench_softmax.SoftmaxTime.track_time"
CPU_BENCHES = (r"GemmSharedMem\.track_value\('gfx942', 'fp16', 'tilelang'\)",
               r"GemmRegisters\.track_value\('gfx942', 'fp16', 'triton'\)")

# (benchmark, case, dtype, backend) -> per commit: seconds per call, None (failed) or
# "skip" (NaN). Synthetic. The GEMM's TileLang slows by 15% at the second commit (at a
# lower clock) and stays slow.
SERIES: dict[tuple[str, str, str, str], list[Any]] = {
    (GEMM, "square-4096", "fp16", "tilelang"): [2.00e-4, 2.30e-4, 2.31e-4],
    (GEMM, "square-4096", "fp16", "triton"): [2.10e-4, 2.12e-4, 2.08e-4],
    (GEMM, "square-4096", "fp16", "torch"): [1.90e-4, 1.91e-4, 1.90e-4],
    (SOFTMAX, "llama3-8b.logits-4k", "bf16", "tilelang"): [4.1e-4, 4.0e-4, "skip"],
    (SOFTMAX, "llama3-8b.logits-4k", "bf16", "triton"): [3.9e-4, 3.95e-4, None],
    (SOFTMAX, "llama3-8b.logits-4k", "bf16", "torch"): [4.5e-4, 4.4e-4, 4.4e-4],
}
FLOPS = {GEMM: 2.0 * 4096 ** 3, SOFTMAX: 5.0 * 4096 * 128256}
BYTES = {GEMM: 2.0 * 3 * 4096 * 4096, SOFTMAX: 2.0 * 2 * 4096 * 128256}


@dataclass
class History:
    repo: Path
    commits: list[str]
    env: dict[str, str]
    records: Path
    assets: Path


def git(repo: Path, *args: str) -> str:
    return _git(repo, *args)


def make_commits(source: Path, tmp: Path) -> tuple[Path, list[str]]:
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(source), str(repo)], check=True)
    git(repo, "checkout", "-q", "-B", "main")  # asv follows branch main
    git(repo, "config", "user.email", "test@kperf")
    git(repo, "config", "user.name", "kperf test")
    git(repo, "remote", "set-url", "origin", "https://github.com/kperf-example/kperf.git")
    first = git(repo, "rev-parse", "HEAD")
    _edit(repo / "kernels/gemm/tilelang_gemm.py",
          '"gfx942": Config(block_M=128, block_N=128, block_K=32,',
          '"gfx942": Config(block_M=128, block_N=128, block_K=64,')
    git(repo, "commit", "-qam", "gemm: larger K tile on gfx942 (TileLang)")
    second = git(repo, "rev-parse", "HEAD")
    with (repo / "README.md").open("a") as f:
        f.write("\n")
    git(repo, "commit", "-qam", HOSTILE)
    return repo, [first, second, git(repo, "rev-parse", "HEAD")]


def run_cpu_suites(repo: Path, commits: list[str], tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir()
    write_machine_file({"machine": CPU_MACHINE, "arch": "x86_64", "gpu": "none"},
                       home / ".asv-machine.json")
    env = asv_env(CPU_MACHINE, repo=repo, cpu_only=True) | {"HOME": str(home)}
    # the clone has no .cache: its gfx942 compiles use this checkout's toolchain (kperf/core/hip.py)
    env.setdefault("KPERF_ROCM_ROOT", str(TOOLCHAIN_ROOT))
    hashes = tmp / "hashes.txt"
    hashes.write_text("\n".join(commits) + "\n")
    args = ["run", "--machine", CPU_MACHINE, "--show-stderr", f"HASHFILE:{hashes}"]
    for regex in CPU_BENCHES:
        args += ["-b", regex]
    rc = run_asv(args, env, repo=repo).returncode
    assert rc == 0, "asv run failed; its output is above"
    return env


def _samples(median: float, n: int = 6) -> list[float]:
    return [median * (1 + d) for d in (-0.004, -0.002, 0.0, 0.0, 0.002, 0.006)[:n]]


def _window(i: int, commit_index: int, schema: int) -> dict[str, Any]:
    clock = 1290.0 if commit_index == 1 else 1410.0 + i  # the slow commit ran at a low clock
    w = {"n_readings": 3, "sm_clock_mhz_min": clock - 15, "sm_clock_mhz_median": clock,
         "sm_clock_mhz_mean": clock, "mem_clock_mhz_median": 2619.0,
         "temperature_c_max": 61.0 + i, "power_w_mean": 640.0 + i,
         "throttle_bits_or": 0x4 if commit_index != 1 else 0x4 | 0x40, "energy_j": None}
    if schema >= 2:
        w |= {"energy_j": 64.0 + i, "power_limit_w": 700.0}
    return w


def write_gpu_fixture(repo: Path, commits: list[str]) -> Path:
    results = repo / ".asv" / "results"
    benchmarks = json.loads((results / "benchmarks.json").read_text())
    mdir = results / GPU_MACHINE
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "machine.json").write_text(json.dumps(
        {"arch": "x86_64", "gpu": GPU_NAME, "machine": GPU_MACHINE, "version": 1}, indent=1))
    records = repo / ".asv" / "records"
    columns = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
               "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
               "samples"]
    for ci, commit in enumerate(commits):
        date = int(git(repo, "show", "-s", "--format=%ct", commit)) * 1000
        out: dict[str, list[Any]] = {}
        for bench in (GEMM, SOFTMAX):
            params = benchmarks[bench]["params"]
            combos = list(itertools.product(*params))
            cols: dict[str, list[Any]] = {c: [] for c in columns[5:]}
            values = []
            for combo in combos:
                key = (bench, *(json.loads(p.replace("'", '"')) for p in combo))
                v = SERIES.get(key, ["skip"] * 3)[ci]
                if isinstance(v, float):
                    s = _samples(v)
                    values.append(v)
                    for c, x in (("stats_ci_99_a", min(s)), ("stats_ci_99_b", max(s)),
                                 ("stats_q_25", s[1]), ("stats_q_75", s[4]),
                                 ("stats_number", 50), ("stats_repeat", len(s)),
                                 ("samples", s)):
                        cols[c].append(x)
                    _write_record(records, commit, ci, bench, key[1:], s)
                else:
                    values.append(None if v is None else float("nan"))
                    for c in cols:
                        cols[c].append(None)
            out[bench] = [values, params, benchmarks[bench]["version"], date, 1.0,
                          *(cols[c] for c in columns[5:])]
        data = {"commit_hash": commit, "env_name": ENV, "date": date,
                "params": {"arch": "x86_64", "gpu": GPU_NAME, "machine": GPU_MACHINE,
                           "python": "3.11"},
                "python": "3.11", "requirements": {}, "env_vars": {},
                "result_columns": columns, "results": out, "durations": {}, "version": 2}
        (mdir / f"{commit[:8]}-{ENV}.json").write_text(json.dumps(data))
    bad = records / GPU_MACHINE / "broken"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "truncated.json").write_text('{"schema": "kperf-record-1", "benchm')
    (bad / "alien.json").write_text(json.dumps({"schema": "someone-else-1", "x": 1}))
    return records


def _write_record(root: Path, commit: str, ci: int, bench: str, params: tuple[str, ...],
                  samples: list[float]) -> None:
    schema = 2 if ci == 2 else 1
    case, dtype, backend = params
    median = sorted(samples)[len(samples) // 2 - 1: len(samples) // 2 + 1]
    med = sum(median) / 2
    windows = [_window(i, ci, schema) for i in range(len(samples))]
    rec = {"schema": f"kperf-record-{schema}", "benchmark": bench,
           "params": {"case": case, "dtype": dtype, "backend": backend},
           "machine": GPU_MACHINE, "commit": commit, "env_name": ENV, "kind": "time",
           "gpu": GPU_NAME, "target": "sm_90a", "recorded_at": 1.0e9 + ci,
           "tflops": FLOPS[bench] / med / 1e12, "gbps": BYTES[bench] / med / 1e9,
           "measurement": {"samples": samples, "number": 50, "mode": "events", "reps": 50,
                           "calls_per_rep": 1, "estimate_s": med, "warmup_trials": 3,
                           "warmup_s": 0.5, "settled": True, "telemetry_backend": "nvml",
                           "telemetry_reason": "synthetic fixture", "windows": windows}}
    if schema >= 2:
        rec["energy_per_call_j"] = 0.128 if backend != "torch" else 0.121
    path = (root / GPU_MACHINE / f"{commit[:8]}-{ENV}" / bench /
            f"{abs(hash((case, dtype, backend))) % 10**8:08d}.{ci}.1.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1))


def write_gate_report(repo: Path, commits: list[str]) -> Path:
    out = repo / ".asv" / "gate-reports" / "pr-17-sm_90"
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "schema": "kperf-gate-1", "exit_code": 1, "status": "regression",
        "summary": "1 SLOW, 1 SAME (synthetic fixture)", "label": "sm_90 <i>fixture</i>",
        "base": commits[0], "head": commits[1], "base_how": "merge-base with main",
        "machine": GPU_MACHINE,
        "cases": [
            {"case": f"{GEMM}('square-4096', 'fp16', 'tilelang')", "env": ENV,
             "klass": "compute", "verdict": "SLOW",
             "reason": "15.0% slower, CI [1.13, 1.17]; <b>clock</b> 1290 vs 1410 MHz",
             "unit": "seconds", "before": 2.0e-4, "after": 2.3e-4, "ratio": 1.15,
             "ci": [1.13, 1.17]},
            {"case": f"{GEMM}('square-4096', 'fp16', 'triton')", "env": ENV,
             "klass": "compute", "verdict": "SAME", "reason": "within 1.5%",
             "unit": "seconds", "before": 2.1e-4, "after": 2.12e-4, "ratio": 1.0095,
             "ci": [0.998, 1.02]}]}
    (out / "gate.json").write_text(json.dumps(report, indent=1))
    (out / "gate.md").write_text("<!-- kperf-gate -->\n### Performance gate — sm_90\n\n"
                                 "**regression** <script>alert(1)</script>\n")
    return out


def build_history(source: Path, tmp: Path, assets: Path) -> History:
    repo, commits = make_commits(source, tmp)
    env = run_cpu_suites(repo, commits, tmp)
    records = write_gpu_fixture(repo, commits)
    write_gate_report(repo, commits)
    codegen_fixture.place(codegen_fixture.load(), repo / ".asv", commits[-1], CPU_MACHINE)
    return History(repo=repo, commits=commits, env=env, records=records, assets=assets)


def publish(history: History) -> int:
    """kperf.site.publish of this working tree over the clone's .asv, as the main job runs it."""
    from kperf.site import publish as publish_tool

    env = {k: v for k, v in history.env.items() if k != "KPERF_RECORD_DIR"}
    return publish_tool.publish(repo=history.repo, env=env, asset_source=history.assets)


# --------------------------------------------------------------------------- step histories
# Histories of the GPU suites made on the CPU from records, for the history's step
# detection and the cause of a step (tests/test_history_site.py). asv's results are
# written by asv itself (its discovery's benchmarks.json, Results.add_result and save, as
# `asv run` stores a timing's samples and a track's value), the records by
# kperf.core.record.write_record from a kperf.core.timing.Measurement, as a benchmark process
# writes them. The figures are synthetic, on a machine named STEP_MACHINE whose GPU reads
# "synthetic fixture, not a measurement"; no figure of it was measured.

STEP_MACHINE = "synthetic-steps"
LIMIT_W = 700.0
TRIAL_SHAPE = (-0.002, -0.001, 0.0, 0.0, 0.001, 0.002)  # a run's trials: median exact


@dataclass(frozen=True)
class Run:
    """One case at one commit, as one benchmark process measured it (synthetic)."""

    time_s: float
    energy_j: float
    sm_clock_mhz: float
    power_w: float
    throttle_bits: int = 0
    temperature_c: float = 55.0


Case = tuple[str, str, str, str]  # (time benchmark, case, dtype, backend)


def energy_name(time_benchmark: str) -> str:
    return time_benchmark.replace("Time.track_time", "Energy.track_energy")


def step_commits(repo: Path, n: int) -> list[str]:
    """A repository of ``n`` commits on main holding this checkout's asv.conf.json and
    kperf.toml, and its ops and benchmarks (links): what publishing reads besides .asv (the
    series' classes and thresholds come from the ops and the benchmarks)."""
    from tests.conftest import REPO

    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for name in ("asv.conf.json", "kperf.toml"):
        (repo / name).write_bytes((REPO / name).read_bytes())
    for name in ("kernels", "benchmarks"):
        (repo / name).symlink_to(REPO / name)
    git(repo, "remote", "add", "origin", "https://github.com/kperf-example/kperf.git")
    commits = []
    for i in range(n):
        (repo / "CHANGES").write_text(f"commit {i}\n")
        git(repo, "add", "-A")
        git(repo, "-c", "user.email=test@kperf", "-c", "user.name=kperf test", "commit",
            "-qm", f"commit {i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def _samples_of(run: Run) -> list[float]:
    return [run.time_s * (1 + d) for d in TRIAL_SHAPE]


def _write_benchmarks(results: Path) -> dict[str, dict[str, Any]]:
    """benchmarks.json as asv's discovery of this checkout's suite writes it."""
    from types import SimpleNamespace

    from asv.benchmarks import Benchmarks

    from kperf.site.series import discover
    from tests.conftest import REPO

    found = discover(REPO / "benchmarks")
    conf = SimpleNamespace(results_dir=str(results), benchmark_dir=str(REPO / "benchmarks"))
    Benchmarks(conf, found).save()
    return {b["name"]: b for b in found}


def _asv_result(bench: dict[str, Any], runs: dict[Case, Run], time_name: str) -> Any:
    """What asv's runner makes of the benchmark's processes: a timing's samples and number
    for a Time suite, the returned value for an Energy suite, NaN where not run."""
    import math

    from asv.runner import BenchmarkResult

    timing = bench["name"] == time_name
    columns = []  # (result, samples, number) of each parameter combination
    for combo in itertools.product(*bench["params"]):
        run = runs.get((time_name, *(json.loads(p.replace("'", '"')) for p in combo)))
        if run is None:
            columns.append((math.nan, None, None))
        elif timing:
            columns.append((True, _samples_of(run), 50))
        else:
            columns.append((run.energy_j, None, None))
    result, samples, number = (list(c) for c in zip(*columns, strict=True))
    return BenchmarkResult(result=result, samples=samples, number=number, errcode=0,
                           stderr="", profile=None)


def _write_results(results: Path, meta: dict[str, dict[str, Any]], commit: str, date: int,
                   runs: dict[Case, Run]) -> None:
    import datetime as dt

    from asv.results import Results

    res = Results({"arch": "x86_64", "gpu": GPU_NAME, "machine": STEP_MACHINE,
                   "python": "3.11"}, {}, commit, date, "3.11", ENV, {})
    started = dt.datetime.fromtimestamp(date / 1000, dt.UTC)
    for time_name in sorted({case[0] for case in runs}):
        for name in (time_name, energy_name(time_name)):
            res.add_result(meta[name], _asv_result(meta[name], runs, time_name),
                           started_at=started, duration=1.0, record_samples=True)
    res.save(str(results))


def _measurement(run: Run) -> dict[str, Any]:
    from kperf.core.telemetry import WindowStats
    from kperf.core.timing import Measurement

    samples = _samples_of(run)
    windows = [WindowStats(n_readings=2, sm_clock_mhz_min=run.sm_clock_mhz - 10,
                           sm_clock_mhz_median=run.sm_clock_mhz,
                           sm_clock_mhz_mean=run.sm_clock_mhz, mem_clock_mhz_median=3201.0,
                           temperature_c_max=run.temperature_c, power_w_mean=run.power_w,
                           throttle_bits_or=run.throttle_bits, energy_j=run.power_w * 0.1,
                           power_limit_w=LIMIT_W) for _ in samples]
    burst = {"bursts": 1, "calls": 200, "device_s": 200 * run.time_s, "span_s": 0.4,
             "power_w": run.power_w, "power_from": "energy counter", "counter_updates": 4,
             "energy_per_call_j": [run.energy_j], "spread": None,
             "temperature_c_start": run.temperature_c - 5,
             "temperature_c_before": run.temperature_c, "power_w_before": run.power_w}
    return Measurement(samples=samples, number=50, mode="events", reps=50, calls_per_rep=1,
                       estimate_s=run.time_s, warmup_trials=12, warmup_s=1.6, settled=True,
                       telemetry_backend="nvml", telemetry_reason="synthetic fixture",
                       windows=windows, energy_per_call_j=run.energy_j, energy_burst=burst,
                       at_cap=run.power_w >= 0.95 * LIMIT_W).as_record()


def _write_step_record(root: Path, commit: str, index: int, case: Case, run: Run) -> None:
    import pytest

    from kperf.core import record
    from kperf.suites.timed import RECORD_FIELDS

    worker = {"measurement": _measurement(run), "config": {}, "target": "sm_90a",
              "gpu": GPU_NAME, "first_call_s": 0.01, "tflops": None, "gbps": None,
              "max_abs_err": 0.0, "energy_per_call_j": run.energy_j, "pid": 1,
              "idle_before_s": 0.2}
    env = {"KPERF_MACHINE": STEP_MACHINE, "ASV_COMMIT": commit, "ASV_ENV_NAME": ENV}
    with pytest.MonkeyPatch.context() as patch:  # what asv and kperf.history.asvrun set
        for key, value in env.items():
            patch.setenv(key, value)
        record.write_record(case[0], dict(zip(TIME_PARAMS, case[1:], strict=True)),
                            {"kind": "time", "recorded_at": 1.0e9 + index,
                             **{k: worker[k] for k in RECORD_FIELDS}}, root)


def build_step_history(tmp: Path, runs: dict[Case, list[Run]], assets: Path) -> History:
    """A history of ``len(runs[case])`` commits: each case's run at each commit, in asv's
    results and in records."""
    import os

    n = len(next(iter(runs.values())))
    repo = tmp / "repo"
    commits = step_commits(repo, n)
    results = repo / ".asv" / "results"
    meta = _write_benchmarks(results)
    (results / STEP_MACHINE).mkdir(parents=True, exist_ok=True)
    (results / STEP_MACHINE / "machine.json").write_text(json.dumps(
        {"arch": "x86_64", "gpu": GPU_NAME, "machine": STEP_MACHINE, "version": 1}))
    records = repo / ".asv" / "records"
    for i, commit in enumerate(commits):
        date = int(git(repo, "show", "-s", "--format=%ct", commit)) * 1000
        _write_results(results, meta, commit, date, {c: rs[i] for c, rs in runs.items()})
        for case, rs in runs.items():
            _write_step_record(records, commit, i, case, rs[i])
    return History(repo=repo, commits=commits, env=dict(os.environ), records=records,
                   assets=assets)
