"""The CPU codegen runner's PR mode end to end (kperf/stacks/codegen_runner.py, as the
perf-gate workflow's codegen job calls it) on a toy project whose workers answer the
gate's "static" and "compile" requests from figures its kernel modules hold: a verdict per
gfx942 toolchain and one for sm_90a, the cause of a change in the code's terms, "code
unchanged" for a knob that does nothing, a kernel of the op's other backend left
unmeasured, a slower compile confirmed by fresh workers, the exit code in ``exit_code``.
The real compilers behind such figures are tests/test_rocm_codegen.py's and
tests/test_codeobj_llvm.py's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kperf.project import DEFAULTS
from tests._git import commit as _commit
from tests._git import git as _git

from .conftest import skip_without_every_target

REPO = Path(__file__).resolve().parent.parent
CHAINS = ("clang19", "llvm19")

KPERF_TOML = '[kperf]\nops = "kernels"\n'

KERNEL = """\
CONFIG = {config!r}  # gfx942's tile configuration
FIGURES = {figures!r}
COMPILE_S = {compile_s!r}
CODE = {code!r}  # what the device code would be: its digest follows it
"""

BENCH = '''\
"""The toy op's suites (its case c, both languages, gfx942 and sm_90a)."""

from kperf.suites import op_suites

(ToyTime, ToyEnergy, ToyRegisters, ToyScratch, ToySharedMem, ToyOccupancy, ToyCodeSize,
 ToyCompile) = op_suites("toy", __name__, codegen_case="c", cases=["c"], dtypes=["fp16"],
                         backends=["tilelang", "triton"], targets=["gfx942", "sm_90a"])
'''

CASE = '''\
import hashlib
import importlib
import random

RNG = random.Random(20261207)  # seeded: each worker's compile times the same every run


def handle(request):
    spec = request["spec"]
    kernel = importlib.import_module(f"kernels.toy.{spec['backend']}_toy")
    figures = dict(kernel.FIGURES[request["target"]])
    if request.get("toolchain") == "llvm19":  # another toolchain, other registers
        figures["registers"] += 8
    text = repr((sorted(figures.items()), kernel.CODE, request.get("toolchain")))
    figures["code_sha"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    if request["op"] == "static":
        config = kernel.CONFIG if request["target"] == "gfx942" else {"block_K": 64}
        return {"figures": figures, "config": config, "artifacts": ["toy"]}
    if request["op"] == "compile":
        seconds = kernel.COMPILE_S * (1 + RNG.gauss(0, 0.01))
        return {"samples": [seconds], "wall_s": [seconds], "code_sha": figures["code_sha"]}
    raise ValueError(request["op"])
'''

GFX = {"registers": 144, "shared_bytes": 16384, "occupancy": 3, "occupancy_limit": "VGPRs",
       "code_bytes": 3520, "scratch_bytes": 0}
SM = {"registers": 168, "shared_bytes": 198656, "occupancy": 3, "occupancy_limit": "shared",
      "code_bytes": 9000, "scratch_bytes": 0}


def _kernel(repo: Path, backend: str, config: dict | None = None, gfx: dict | None = None,
            compile_s: float = 1.0, code: str = "v1") -> None:
    figures = {"gfx942": {**GFX, **(gfx or {})}, "sm_90a": SM}
    (repo / "kernels" / "toy" / f"{backend}_toy.py").write_text(KERNEL.format(
        config=config or {"block_K": 32, "num_stages": 3}, figures=figures,
        compile_s=compile_s, code=code))


def _build(root: Path) -> dict[str, str]:
    repo = root / "toy"
    (repo / "kernels" / "toy").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    shutil.copy(REPO / "benchmarks" / "__init__.py", repo / "benchmarks" / "__init__.py")
    (repo / "benchmarks" / "bench_toy.py").write_text(BENCH)
    (root / "toy_handler.py").write_text(CASE)
    (repo / "kperf.toml").write_text(KPERF_TOML)
    for init in (repo / "kernels" / "__init__.py", repo / "kernels" / "toy" / "__init__.py"):
        init.write_text("")
    for backend in ("tilelang", "triton"):
        _kernel(repo, backend)
    th = json.loads((DEFAULTS / "thresholds.json").read_text())
    th["rules"] = [{"match": r"\.ToyOccupancy\.", "class": "static", "higher_is_better": True},
                   {"match": r"\.Toy(Registers|SharedMem|Scratch)\.", "class": "static"},
                   {"match": r"\.ToyCompile\.", "class": "compile"}]
    (repo / "thresholds.json").write_text(json.dumps(th, indent=1))
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "toy-kernels", "repo": ".", "branches": ["main"],
        "results_dir": ".asv/results", "html_dir": ".asv/html"}))
    (repo / ".gitignore").write_text(".asv/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    shas = {"base": _commit(repo, "base")}
    edits = {  # a gfx942-only tile edit; a knob that changes no code; Triton alone; a compile
        "lds": lambda: _kernel(repo, "tilelang", {"block_K": 64, "num_stages": 3},
                               {"shared_bytes": 32768, "occupancy": 2, "occupancy_limit": "LDS",
                                "registers": 148}, code="v2"),
        "knob": lambda: _kernel(repo, "tilelang", {"block_K": 32, "num_stages": 2}),
        "triton_compile": lambda: _kernel(repo, "triton", compile_s=2.0)}
    for branch, edit in edits.items():
        _git(repo, "checkout", "-q", "-b", branch, "main")
        edit()
        shas[branch] = _commit(repo, branch)
    _git(repo, "checkout", "-q", "main")
    return shas


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict:
    skip_without_every_target()
    root = tmp_path_factory.mktemp("codegen-runner")
    return {"root": root, "repo": root / "toy", **_build(root)}


def _runner(toy: dict, head: str) -> tuple[int, dict, str, str]:
    out = toy["root"] / f"out-{head}"
    env = dict(os.environ, KPERF_WORKER_DIR=str(toy["root"] / "workers"),
               KPERF_WORKER_IDLE_S="30",
               KPERF_WORKER_HANDLER=f"{toy['root'] / 'toy_handler.py'}:handle")
    env.pop("KPERF_ROCM_TOOLCHAIN", None)
    cmd = [sys.executable, "-m", "kperf.stacks.codegen_runner", "pr", "--repo",
           str(toy["repo"]), "--base", toy["base"], "--head", toy[head], "--out", str(out),
           "--pr-dir", str(toy["root"] / f"pr-{head}"), "--rocm-toolchain", *CHAINS]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert (out / "exit_code").read_text().strip() == str(proc.returncode), proc.stderr
    return (proc.returncode, json.loads((out / "gate.json").read_text()),
            (out / "gate.md").read_text(), proc.stdout + proc.stderr)


def _rows(report: dict) -> dict[tuple[str, str], dict]:
    return {(g["target"], g["toolchain"]): g for g in report["codegen"]}


@pytest.mark.slow
def test_a_gfx942_tile_edit_is_slow_under_each_toolchain_with_its_cause(toy: dict) -> None:
    code, report, text, log = _runner(toy, "lds")
    assert code == 1, log
    rows = _rows(report)
    assert set(rows) == {("gfx942", "clang19"), ("gfx942", "llvm19"),
                         ("sm_90a", "nvcc · Triton's LLVM")}, rows
    for chain, vgprs in (("clang19", "144 → 148"), ("llvm19", "152 → 156")):
        assert rows[("gfx942", chain)]["verdict"] == "SLOW"
        line = next(k["line"] for k in rows[("gfx942", chain)]["kernels"]
                    if k["backend"] == "tilelang")
        assert line == (f"toy c fp16 TileLang: block_K 32 → 64: occupancy 3 → 2 waves, "
                        f"limited by LDS: 16 KB → 32 KB; VGPRs {vgprs}"), line
    assert rows[("sm_90a", "nvcc · Triton's LLVM")]["verdict"] == "SAME"
    assert "| gfx942 | llvm19 | **SLOW** |" in text and "#### Generated code" in text
    occupancy = next(c for c in report["cases"] if c["case"].startswith(
        "bench_toy.ToyOccupancy.track_value('gfx942', 'fp16', 'tilelang') [clang19]"))
    assert occupancy["verdict"] == "SLOW", "an occupancy that falls is worse"
    triton = [c for c in report["cases"] if "'triton')" in c["case"]]
    assert triton and all(c["unchanged"] for c in triton), "Triton's code did not change"


@pytest.mark.slow
def test_a_knob_that_changes_no_code_reads_unchanged_and_passes(toy: dict) -> None:
    code, report, text, log = _runner(toy, "knob")
    assert code == 0, log
    for (target, _chain), row in _rows(report).items():
        assert row["verdict"] == "SAME"
        line = next(k["line"] for k in row["kernels"] if k["backend"] == "tilelang")
        config = "num_stages 3 → 2: " if target == "gfx942" else ""
        assert line == f"toy c fp16 TileLang: {config}{target} code unchanged", line
    assert "num\\_stages 3 → 2: gfx942 code unchanged" in text


@pytest.mark.slow
def test_a_slower_compile_is_confirmed_and_the_other_backend_left_alone(toy: dict) -> None:
    code, report, _text, log = _runner(toy, "triton_compile")
    assert code == 1, log
    compiles = {c["case"]: c for c in report["cases"] if "ToyCompile" in c["case"]}
    for name, case in compiles.items():
        if "'triton'" in name:
            blocks = (toy["root"] / "pr-triton_compile" / "blocks.jsonl").read_text()
            assert case["verdict"] == "SLOW" and case["confirmed"] is True, (
                json.dumps(case, indent=1), [row for row in blocks.splitlines() if name in row],
                log)
            assert case["ratio"] == pytest.approx(2.0, rel=0.05)
        else:
            assert case["unchanged"] is True, "TileLang's kernel did not change"
    pr = toy["root"] / "pr-triton_compile"
    rows = [json.loads(line) for line in (pr / "blocks.jsonl").read_text().splitlines()]
    mine = [r for r in rows if "ToyCompile" in r["case"] and "('gfx942', 'fp16', 'triton')"
            in r["case"]]
    confirming = {r["generation"] for r in mine if r.get("confirm")}
    assert len(confirming) == 1 and not confirming & {r["generation"] for r in mine
                                                      if not r.get("confirm")}, "fresh workers"
    lines = [k["line"] for g in report["codegen"] for k in g["kernels"] if k["line"]]
    assert lines and all(re.search(r"code unchanged; cold compile SLOW x(1\.9\d|2\.0\d) ", line)
                         for line in lines), lines
