"""kperf beside a team's own kernels (issue 50): a repository built from nothing
(tests/team_fixture.py: its own package, one op of its own, three commits), set up by
``kperf init``, measured by the main job on the CPU across its commits, gated by the CPU
codegen runner between two of them, and published; each commit's figures are its own.
And what ``kperf init`` writes: kperf's own workflows are renderings of the same
templates, a team's are actionlint clean, and an unpinned GPU image is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kperf import workflows
from tests.team_fixture import build_team, kperf

from .conftest import REPO, skip_without_every_target
from .test_gate_workflows import actionlint_findings

MACHINE = "team-cpu"
DIGEST = "sha256:" + "ab" * 32


def _machine_file(home: Path) -> None:
    from kperf.machine import write_machine_file

    home.mkdir()
    write_machine_file({"machine": MACHINE, "arch": "x86_64", "gpu": "none"},
                       home / ".asv-machine.json")


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> dict:
    skip_without_every_target()
    tmp = tmp_path_factory.mktemp("team")
    root = tmp / "team"
    shas = build_team(root)
    home = tmp / "home"
    _machine_file(home)
    env = dict(os.environ, HOME=str(home), KPERF_ROCM_ROOT=os.environ["KPERF_ROCM_ROOT"])
    env.pop("KPERF_ROCM_TOOLCHAIN", None)
    run = kperf(root, "run", "--range", shas["c3"], "--machine", MACHINE, env=env)
    return {"root": root, "env": env, "run": run, "tmp": tmp, **shas}


def _figure(team: dict, commit: str, suite: str, params: tuple[str, ...]) -> float:
    results = team["root"] / ".asv" / "results" / MACHINE
    (path,) = results.glob(f"{team[commit][:8]}-*.json")
    data = json.loads(path.read_text())
    row = dict(zip(data["result_columns"], data["results"][suite], strict=False))
    import itertools

    combos = list(itertools.product(*row["params"]))
    return row["result"][combos.index(tuple(repr(p) for p in params))]


@pytest.mark.slow
def test_the_main_job_measures_each_commits_own_kernels(team: dict) -> None:
    run = team["run"]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "No GPU found" in run.stdout and "3 commit(s)" in run.stdout, run.stdout[-2000:]
    regs = "bench_scale.ScaleRegisters.track_value"
    for target in ("gfx942", "sm_90a"):
        triton = [_figure(team, c, regs, (target, "fp16", "triton")) for c in ("c1", "c2", "c3")]
        tilelang = [_figure(team, c, regs, (target, "fp16", "tilelang"))
                    for c in ("c1", "c2", "c3")]
        # the launch change moves the Triton registers, the tile change the TileLang ones
        assert triton[0] != triton[1] == triton[2], (target, triton)
        assert tilelang[0] == tilelang[1] != tilelang[2], (target, tilelang)
    # the record of a result names the instrument that made it
    record = next((team["root"] / ".asv" / "codegen-records").rglob("*.json"))
    assert json.loads(record.read_text())["kperf"].startswith("kperf ")


@pytest.mark.slow
def test_the_codegen_gate_names_the_tile_change_in_the_codes_terms(team: dict) -> None:
    out = team["tmp"] / "gate-out"
    done = kperf(team["root"], "codegen", "pr", "--base", team["c2"], "--head", team["c3"],
                 "--rocm-toolchain", "clang19", "--out", str(out), env=team["env"])
    report = json.loads((out / "gate.json").read_text())
    lines = [k["line"] for g in report["codegen"] for k in g["kernels"] if k["line"]]
    tilelang = [line for line in lines if "TileLang" in line]
    assert tilelang and all("block 1024 → 4096" in line for line in tilelang), lines
    triton = [c for c in report["cases"] if "'triton')" in c["case"]]
    assert triton and all(c["unchanged"] for c in triton), "the Triton kernel did not change"
    assert done.returncode == int((out / "exit_code").read_text()), done.stderr[-3000:]


@pytest.mark.slow
def test_the_site_is_published_with_the_teams_op(team: dict) -> None:
    html = team["root"] / "html"
    assert (html / "index.html").is_file() and (html / "kperf" / "index.html").is_file()
    assert "scale" in (html / "kperf" / "codegen.html").read_text()
    graphs = list((html / "graphs").rglob("bench_scale.ScaleRegisters.track_value.json"))
    assert graphs, "the op's series are in asv's graphs"


def test_kperfs_own_workflows_are_renderings_of_the_templates() -> None:
    """The security design of docs/security.md is one: kperf's workflows and a team's
    come from the same templates."""
    context = workflows.self_context()
    for path in sorted((REPO / ".github" / "workflows").glob("*.yml")):
        assert workflows.render(path.name, context) == path.read_text(), path.name
    assert (REPO / ".github" / "scripts" / "perf-gate.js").read_text() == \
        workflows.SCRIPT.read_text()


def test_init_writes_runnable_workflows_for_pinned_images_only(tmp_path: Path) -> None:
    (tmp_path / "myteam_kernels").mkdir()
    (tmp_path / "myteam_kernels" / "__init__.py").write_text("")
    unpinned = kperf(tmp_path, "init", "--ops", "myteam_kernels", "--gpu-image",
                     "gfx942=rocm/pytorch:latest")
    assert unpinned.returncode == 2 and "pinned by digest" in unpinned.stderr
    assert not (tmp_path / "kperf.toml").exists(), "nothing written"
    done = kperf(tmp_path, "init", "--ops", "myteam_kernels", "--gpu-image",
                 f"mi300x:amd=rocm/pytorch:rocm7.0@{DIGEST}", "--gpu-image",
                 f"h100:nvidia=nvcr.io/nvidia/pytorch:25.01-py3@{DIGEST}",
                 "--kperf-requirement", "kperf @ git+https://example.com/kperf@" + "0" * 40)
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / ".github" / "workflows").glob("*.yml"))
    assert [p.name for p in written] == ["perf-gate-run.yml", "perf-gate.yml",
                                         "perf-nightly.yml"]
    gate_run = (tmp_path / ".github" / "workflows" / "perf-gate-run.yml").read_text()
    assert f"image: rocm/pytorch:rocm7.0@{DIGEST}" in gate_run and "PIN-ME" not in gate_run
    assert "--device=/dev/kfd" in gate_run and "--gpus all" in gate_run
    findings = actionlint_findings(written, labels=("mi300x", "h100"))
    assert not findings, "\n".join(findings)
    for name in ("kperf.toml", "asv.conf.json", "thresholds.json", "benchmarks/__init__.py",
                 "tests/test_kperf_ops.py", ".github/scripts/perf-gate.js"):
        assert (tmp_path / name).is_file(), name


def test_init_without_gpus_writes_the_cpu_codegen_workflow_alone(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    done = kperf(tmp_path, "init", "--ops", "pkg")
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in (tmp_path / ".github" / "workflows").glob("*.yml"))
    assert written == ["perf-gate.yml"]
    text = (tmp_path / ".github" / "workflows" / "perf-gate.yml").read_text()
    assert "kperf codegen pr" in text and "tools/setup_env.sh" not in text
    assert not actionlint_findings([tmp_path / ".github" / "workflows" / "perf-gate.yml"])
