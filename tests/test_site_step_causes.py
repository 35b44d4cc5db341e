"""The causes of the history's steps without a browser or asv's publish (kperf/site/steps.py,
falls.py): on a machine with several asv environments (a gfx942 toolchain
each) a step reads its own environment's values and records only; a code step's cause
from its latest codegen records either side; the falls of the series where higher is better,
past their threshold, and of no other series. (In Chromium on a published site:
tests/test_site_code_steps.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from kperf.gate.config import Thresholds
from kperf.project import DEFAULTS
from kperf.site import data, falls, steps

from .test_site_pages import _capped

A, B, C = "a" * 40, "b" * 40, "c" * 40
REVISIONS = {A: 0, B: 1, C: 2}
TOOLCHAIN = "env-KPERF_ROCM_TOOLCHAIN"
TIME = "bench_gemm.GemmTime.track_time"
COMPILE = "bench_gemm.GemmCompile.track_compile"
KERNEL = {"target": "gfx942", "dtype": "fp16", "backend": "tilelang"}
CODE_META = {COMPILE: {"param_names": list(KERNEL)}}
TH = Thresholds.load(DEFAULTS / "thresholds.json")


def _graph(chain: str, bench: str) -> str:
    return f"graphs/arch-x86_64/branch-main/{TOOLCHAIN}-{chain}/machine-m1/{bench}.json"


def _file(commit: str, chain: str, bench: str, value: float, params: list) -> data.ResultFile:
    return data.ResultFile(machine="m1", commit=commit, env_name=f"env-{chain}", date=1,
                           label="x", results={bench: {"result": [value], "params": params}},
                           params={TOOLCHAIN: chain})


def _time_file(commit: str, chain: str, value: float) -> data.ResultFile:
    return _file(commit, chain, TIME, value, [["'square-4096'"], ["'fp16'"], ["'tilelang'"]])


def _time_record(commit: str, chain: str, clock: float, bits: int = 0x4) -> dict:
    return _capped(commit, clock, bits) | {"env_name": f"env-{chain}"}


def test_a_step_reads_its_own_environments_values_and_records() -> None:
    """Under clang19 the kernel steps x1.1 with the clock down at the power limit (the
    code's); under rocm-7.2.2, whose files come first, it holds and its records are hot.
    The clang19 step takes neither rocm-7.2.2's values nor its records."""
    files = [_time_file(c, "rocm-7.2.2", 3.0e-4) for c in (A, B, C)]
    files += [_time_file(c, "clang19", v) for c, v in zip((A, B, C), (2.0e-4, 2.0e-4, 2.2e-4),
                                                        strict=True)]
    records = [_time_record(B, "clang19", 1400.0), _time_record(C, "clang19", 1270.0),
               _time_record(B, "rocm-7.2.2", 1400.0, 0x4 | 0x20),
               _time_record(C, "rocm-7.2.2", 1400.0, 0x4 | 0x20)]
    history = steps.History(files, {}, records, REVISIONS)
    name = f"{TIME}('square-4096', 'fp16', 'tilelang')"
    regressions = {"regressions": [[name, _graph("clang19", TIME), {}, 0, 2.2e-4, 2.0e-4,
                                    [[1, 2, 2.0e-4, 2.2e-4]]]]}
    (step,) = steps.find_steps(regressions, {"0": A, "1": B, "2": C}, ["m1"], history, TH)
    assert (step.before.runs, step.after.runs) == (1, 1)
    assert step.before.time_s == 2.0e-4 and step.after.time_s == 2.2e-4
    assert step.cause == "code" and step.text.startswith("x1.100, energy +0.0%, clock 1400 → "
                                                         "1270 MHz at the 700 W limit")
    assert history.files_of("m1", C, _graph("rocm-7.2.2", TIME)) == [files[2]]


def _codegen(commit: str, sha: str, at: float) -> dict:
    return {"schema": "kperf-record-2", "kind": "codegen", "machine": "m1", "commit": commit,
            "benchmark": "bench_gemm.GemmCodeSize.track_value", "params": dict(KERNEL),
            "env_name": "env-clang19", "recorded_at": at, "config": {"block_K": 32},
            "figures": {"registers": 144, "occupancy": 3, "code_sha": sha}}


def _compile_step(records: list[dict]) -> steps.Step:
    params = [[f"'{v}'"] for v in KERNEL.values()]
    files = [_file(c, "clang19", COMPILE, v, params)
             for c, v in zip((A, B, C), (1.0, 1.0, 1.5), strict=True)]
    history = steps.History(files, CODE_META, records, REVISIONS)
    name = f"{COMPILE}('gfx942', 'fp16', 'tilelang')"
    regressions = {"regressions": [[name, _graph("clang19", COMPILE), {}, 0, 1.5, 1.0,
                                    [[1, 2, 1.0, 1.5]]]]}
    (step,) = steps.find_steps(regressions, {"0": A, "1": B, "2": C}, ["m1"], history, TH)
    return step


def test_a_compile_step_is_the_codes_only_where_the_latest_code_changed() -> None:
    """At the commit after the step a first run made other code and a rerun the same code
    as before: the latest record decides, the compiler's own time moved. Without a codegen
    record on a side the cause is unknown."""
    same = _compile_step([_codegen(B, "s1", 1.0), _codegen(C, "s2", 2.0),
                          _codegen(C, "s1", 3.0)])
    assert same.cause == "none" and "compiler's own time" in same.why
    assert same.text.startswith("cold compile x1.500 (1.00 → 1.50 CPU s); ")
    changed = _compile_step([_codegen(B, "s1", 1.0), _codegen(C, "s2", 2.0)])
    assert changed.cause == "code" and changed.why == "the generated code changed"
    alone = _compile_step([_codegen(C, "s2", 2.0)])
    assert alone.cause == "unknown" and "no codegen record" in alone.why


def _site(tmp_path: Path, series: dict[str, list[float]]) -> Path:
    """A published site's index, graphs and regressions.json (none flagged) holding
    ``series``: benchmark -> its values at revisions 0, 1, ..."""
    html = tmp_path / "html"
    graph_params = {"arch": "x86_64", "branch": "main", "machine": "m1"}
    revisions = {str(i): f"{i:040x}" for i in range(max(map(len, series.values())))}
    index = {"benchmarks": {b: {"params": [[f"'{v}'"] for v in KERNEL.values()]}
                            for b in series},
             "params": {k: [v] for k, v in graph_params.items()},
             "graph_param_list": [graph_params], "revision_to_hash": revisions}
    for bench, values in series.items():
        path = html / (falls._graph_path(graph_params, bench) + ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([[i, [v]] for i, v in enumerate(values)]))
    (html / "index.json").write_text(json.dumps(index))
    (html / "regressions.json").write_text(json.dumps({"regressions": []}))
    return html


def test_falls_are_flagged_where_higher_is_better_past_the_threshold(tmp_path: Path) -> None:
    """An occupancy from 3 to 2 waves is flagged with its values as measured; one from 8 to
    7 is inside its 20% threshold; a register count that falls is better, never flagged."""
    fell, slight = "bench_gemm.GemmOccupancy.track_value", "bench_rmsnorm.RmsnormOccupancy"
    slight += ".track_value"
    registers = "bench_gemm.GemmRegisters.track_value"
    html = _site(tmp_path, {fell: [3, 3, 3, 2, 2, 2], slight: [8, 8, 8, 7, 7, 7],
                            registers: [148, 148, 148, 120, 120, 120]})
    conf = {"regressions_thresholds": {r".*Occupancy\.": 0.2, ".": 0.0}}
    added = falls.add_falls(html, conf, DEFAULTS / "thresholds.json", tmp_path)
    assert added == [f"{fell}('gfx942', 'fp16', 'tilelang')"]
    (entry,) = json.loads((html / "regressions.json").read_text())["regressions"]
    assert entry[4:6] == [2.0, 3.0] and entry[6] == [[2, 3, 3.0, 2.0]]
