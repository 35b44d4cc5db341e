"""``kperf upgrade`` (kperf/stacks/upgrade.py) end to end on a toy project whose workers
answer from figures, where a candidate "compiler" (a folder with a ``triton`` distribution
and a ``toy_stack`` module) changes them only where it is on the path: the head side's.
One commit on both sides; the candidate's registers that move at the same occupancy pass
with their headroom, an occupancy it lowers fails, a toolchain pair compiles TileLang's
gfx942 source with the new one on head only, and kernels whose compilers the candidate
does not change are not compiled. The real releases' report is
tests/test_upgrade_recorded.py's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests._git import commit as _commit
from tests._git import git as _git
from tests.test_codegen_runner import BENCH, KPERF_TOML, _kernel

from .conftest import skip_without_every_target

REPO = Path(__file__).resolve().parent.parent

HANDLER = '''\
import hashlib
import importlib


def handle(request):
    spec = request["spec"]
    kernel = importlib.import_module(f"kernels.toy.{spec['backend']}_toy")
    figures = dict(kernel.FIGURES[request["target"]], threads=256)
    try:
        import toy_stack  # the candidate: on the head side's path only
        figures.update(toy_stack.CHANGES.get((spec["backend"], request["target"]), {}))
    except ImportError:
        pass
    if request.get("toolchain") == "llvm19":  # another toolchain, other registers
        figures["registers"] += 8
    text = repr((sorted(figures.items()), kernel.CODE, request.get("toolchain")))
    figures["code_sha"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    if request["op"] == "static":
        return {"figures": figures, "config": kernel.CONFIG, "artifacts": ["toy"]}
    raise ValueError(request["op"])
'''


def _project(root: Path) -> Path:
    repo = root / "toy"
    (repo / "kernels" / "toy").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench_toy.py").write_text(BENCH)
    (repo / "kperf.toml").write_text(KPERF_TOML)
    for init in (repo / "kernels" / "__init__.py", repo / "kernels" / "toy" / "__init__.py"):
        init.write_text("")
    for backend in ("tilelang", "triton"):
        _kernel(repo, backend)
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "toy-kernels", "repo": ".", "branches": ["main"],
        "results_dir": ".asv/results", "html_dir": ".asv/html"}))
    (repo / ".gitignore").write_text(".asv/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "toy")
    (root / "toy_handler.py").write_text(HANDLER)
    return repo


def _candidate(root: Path, name: str, changes: dict) -> Path:
    """A folder of packages as pip --target leaves it: a triton distribution's metadata
    and the module whose figures the toy's workers take."""
    site = root / name
    info = site / "triton-9.9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: triton\nVersion: 9.9.9\n")
    (site / "toy_stack.py").write_text(f"CHANGES = {changes!r}\n")
    return site


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    skip_without_every_target()
    root = tmp_path_factory.mktemp("upgrade")
    _project(root)
    return root


def _upgrade(root: Path, name: str, *args: str) -> tuple[int, dict, str, str]:
    out = root / f"out-{name}"
    env = dict(os.environ, KPERF_WORKER_DIR=str(root / "workers"), KPERF_WORKER_IDLE_S="30",
               KPERF_WORKER_HANDLER=f"{root / 'toy_handler.py'}:handle")
    env.pop("KPERF_ROCM_TOOLCHAIN", None)
    cmd = [sys.executable, "-m", "kperf", "upgrade", "--repo", str(root / "toy"), "--out",
           str(out), "--pr-dir", str(root / f"run-{name}"), "-b", r"Toy(Registers|Occupancy)",
           *args]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    report = json.loads((out / "gate.json").read_text()) if (out / "gate.json").exists() else {}
    text = (out / "gate.md").read_text() if (out / "gate.md").exists() else ""
    return proc.returncode, report, text, log


def _lines(report: dict) -> dict[tuple[str, str], list[str]]:
    return {(g["target"], g["toolchain"]): [k["line"] for k in g["kernels"]]
            for g in report["codegen"]}


@pytest.mark.slow
def test_registers_that_cost_nothing_pass_with_their_headroom(toy: Path) -> None:
    site = _candidate(toy, "more-registers", {("triton", "gfx942"): {"registers": 152}})
    code, report, text, log = _upgrade(toy, "registers", "--site", str(site))
    assert code == 0, log
    assert text.startswith("<!-- kperf-gate -->\n### Before you upgrade — triton 9.9.9"), text
    assert report["stacks"]["head"]["versions"] == {"triton": "9.9.9"}
    assert report["stacks"]["base"]["label"].startswith("triton ")
    lines = _lines(report)
    assert lines[("gfx942", "Triton's LLVM")] == [
        "toy c fp16 Triton: VGPRs 144 → 152; occupancy unchanged: 152 of 168 VGPRs for 3 "
        "waves"], lines
    assert lines[("sm_90a", "nvcc · Triton's LLVM")] == ["toy c fp16 Triton: sm_90a code "
                                                         "unchanged"], lines
    assert not any("'tilelang'" in c["case"] for c in report["cases"]), (
        "the candidate changes no TileLang compiler: its kernels are not compiled")
    assert "TileLang kernels not compiled: their compilers are the same on both sides" in text


OCCUPANCY = "bench_toy.ToyOccupancy.track_value('gfx942', 'fp16', 'triton')"


@pytest.mark.slow
@pytest.mark.parametrize("name, changes, line, slow", [
    ("fewer-waves", {"registers": 176, "occupancy": 2, "occupancy_limit": "VGPRs"},
     "occupancy 3 → 2 waves, limited by VGPRs: 144 → 176",
     {OCCUPANCY: "costs: occupancy 3 → 2 (VGPRs)",
      "bench_toy.ToyRegisters.track_value('gfx942', 'fp16', 'triton')":
          "costs: occupancy 3 → 2 (VGPRs)"}),
    ("too-much-lds", {"shared_bytes": 98304, "occupancy": 0, "occupancy_limit": "LDS"},
     "occupancy 3 → 0 waves, limited by LDS: 16 KB → 96 KB",
     {OCCUPANCY: "costs: occupancy 3 → 0 (LDS)"}),
])
def test_what_the_candidate_costs_fails(toy: Path, name: str, changes: dict, line: str,
                                        slow: dict) -> None:
    """An occupancy the candidate lowers, and LDS past the target's limit (cannot launch)."""
    site = _candidate(toy, name, {("triton", "gfx942"): changes})
    code, report, _text, log = _upgrade(toy, name, "--site", str(site))
    assert code == 1, log
    assert _lines(report)[("gfx942", "Triton's LLVM")] == [f"toy c fp16 Triton: {line}"]
    assert {c["case"]: c["reason"] for c in report["cases"] if c["verdict"] == "SLOW"} == slow


@pytest.mark.slow
def test_a_toolchain_pair_compiles_head_with_the_new_one(toy: Path) -> None:
    code, report, text, log = _upgrade(toy, "toolchain", "--rocm-toolchain", "clang19=llvm19")
    assert code == 0, log
    lines = _lines(report)
    assert list(lines) == [("gfx942", "clang19 → llvm19")], lines
    assert lines[("gfx942", "clang19 → llvm19")] == [
        "toy c fp16 TileLang: VGPRs 144 → 152; occupancy unchanged: 152 of 168 VGPRs for 3 "
        "waves"]
    assert report["stacks"]["head"]["label"] == "gfx942 llvm19", report["stacks"]
    assert "Triton kernels not compiled: their compilers are the same" in text


@pytest.mark.parametrize("args, said", [
    ((), "nothing to upgrade"),
    (("--rocm-toolchain", "clang19"), "want OLD=NEW"),
    (("--rocm-toolchain", "clang19=clang19"), "two different toolchains"),
    (("--triton", "3.9.0", "--site", "x"), "not both"),
    (("--site", "/nonexistent/site"), "not a folder"),
    (("--triton", "3.9.0; rm"), "not a version"),
])
def test_what_cannot_be_upgraded_is_the_tools_failure(tmp_path: Path, args: tuple,
                                                      said: str) -> None:
    repo = _project(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kperf", "upgrade", "--repo", str(repo),
                           *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def _fake_wheel(folder: Path, version: str, changes: dict) -> Path:
    """A ``triton`` wheel whose only module is the toy's candidate figures."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"triton-{version}-py3-none-any.whl"
    info = f"triton-{version}.dist-info"
    files = {"toy_stack.py": f"CHANGES = {changes!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: triton\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.mark.slow
def test_a_pull_request_that_bumps_a_pin_gets_the_upgrade_section(tmp_path: Path) -> None:
    """The codegen job of a PR that moves Triton's pin: base's release (here a stand-in
    whose kernels had 8 fewer registers a thread on sm_90a and the same occupancy) against
    head's, this interpreter's, at head; its section in gate.md, passing."""
    from importlib import metadata

    skip_without_every_target()
    repo = _project(tmp_path)
    pinned = metadata.version("triton")
    pyproject = '[project]\nname = "toy"\nversion = "0"\n[project.optional-dependencies]\n' \
                'stack = ["triton=={}", "numpy"]\n'
    (repo / "pyproject.toml").write_text(pyproject.format("0.0.1"))
    base = _commit(repo, "pins")
    (repo / "pyproject.toml").write_text(pyproject.format(pinned))
    _commit(repo, "bump triton")
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, "0.0.1", {("triton", "sm_90a"): {"registers": 160}})
    out = tmp_path / "out"
    workers = Path(tempfile.mkdtemp(prefix="ku-"))  # short: a socket's path < 108 bytes
    env = dict(os.environ, KPERF_WORKER_DIR=str(workers), KPERF_WORKER_IDLE_S="30",
               KPERF_WORKER_HANDLER=f"{tmp_path / 'toy_handler.py'}:handle",
               PIP_FIND_LINKS=str(wheels), PIP_NO_INDEX="1")
    env.pop("KPERF_ROCM_TOOLCHAIN", None)
    proc = subprocess.run([sys.executable, "-m", "kperf", "codegen", "pr", "--repo", str(repo),
                           "--base", base, "--out", str(out), "--pr-dir", str(tmp_path / "pr"),
                           "--rocm-toolchain", "clang19", "-b", r"Toy(Registers|Occupancy)"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    shutil.rmtree(workers, ignore_errors=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert (out / "exit_code").read_text().strip() == "0"
    text = (out / "gate.md").read_text()
    assert text.count("<!-- kperf-gate -->") == 1, "one comment, the upgrade a section of it"
    assert f"#### Before you upgrade — triton {pinned}" in text, text
    assert f"triton 0.0.1 (base) → triton {pinned} (head)" in text, text
    upgrade = json.loads((out / "upgrade" / "gate.json").read_text())
    lines = _lines(upgrade)
    assert lines[("sm_90a", "nvcc · Triton's LLVM")] == [
        "toy c fp16 Triton: registers a thread 160 → 168; occupancy unchanged: 168 of 168 "
        "registers a thread for 3 warps a scheduler"], lines


def test_pin_changes_read_the_stack_extra_and_the_toolchains(tmp_path: Path) -> None:
    from kperf.stacks.upgrade import pin_changes

    repo = tmp_path / "r"
    (repo / "kperf" / "toolchains").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    chains = repo / "kperf" / "toolchains" / "rocm-toolchains.json"
    pyproject = ('[project.optional-dependencies]\nstack = ["torch==2.13.0", "triton=={}", '
                 '"tilelang==0.1.15", "apache-tvm-ffi==0.1.12"]\n')
    (repo / "pyproject.toml").write_text(pyproject.format("3.7.1"))
    chains.write_text(json.dumps({"rocm": {"rocm-6.4.4": {}, "rocm-7.0.2": {}}}))
    base = _commit(repo, "pins")
    assert pin_changes(repo, base) == ({}, {})
    (repo / "pyproject.toml").write_text(pyproject.format("3.9.0"))
    chains.write_text(json.dumps({"rocm": {"rocm-6.4.4": {}, "rocm-7.0.2": {},
                                           "rocm-7.10.0": {}}}))
    assert pin_changes(repo, base) == ({"triton": ("3.7.1", "3.9.0")},
                                       {"rocm-7.0.2": "rocm-7.10.0"})


@pytest.mark.slow
def test_two_components_of_one_kernel_are_judged_one_at_a_time(toy: Path) -> None:
    """TileLang's packages and the gfx942 toolchain both make a TileLang kernel's gfx942
    code: a candidate that changes both says what each did alone."""
    site = _candidate(toy, "tilelang-and-toolchain", {("tilelang", "gfx942"): {
        "registers": 148}})
    info = next(site.glob("*.dist-info"))
    info.rename(site / "tilelang-9.9.9.dist-info")
    (site / "tilelang-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tilelang\nVersion: 9.9.9\n")
    code, report, _text, log = _upgrade(toy, "both", "--site", str(site),
                                        "--rocm-toolchain", "clang19=llvm19")
    assert code == 0, log
    [line] = _lines(report)[("gfx942", "clang19 → llvm19")]
    assert line == ("toy c fp16 TileLang: VGPRs 144 → 156; occupancy unchanged: 156 of 168 "
                    "VGPRs for 3 waves (one at a time: tilelang 9.9.9: VGPRs 144 → 148; "
                    "occupancy unchanged: 148 of 168 VGPRs for 3 waves; gfx942 llvm19: VGPRs "
                    "144 → 152; occupancy unchanged: 152 of 168 VGPRs for 3 waves)"), line
    assert (toy / "run-both-alone-toolchain" / "gate.json").exists()


def test_newest_takes_each_newer_release_and_says_when_the_pins_are_newest(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The nightly's candidate: each of Triton and TileLang newer on the index than
    pinned; with none newer, nothing to judge, exit 0."""
    from kperf.stacks import matrix, upgrade

    index = {"triton": "99.0.0", "tilelang": upgrade.pinned_versions()["tilelang"]}
    monkeypatch.setattr(matrix, "pip_report", lambda name: {"version": index[name]})
    args = upgrade.build_parser().parse_args(["--newest"])
    said = upgrade.newest(args)
    assert (args.triton, args.tilelang) == ("99.0.0", None), said
    assert said[0].endswith("newest 99.0.0")
    index["triton"] = upgrade.pinned_versions()["triton"]
    assert upgrade.main(["--newest"]) == 0
    assert "the pins are the newest releases: nothing to judge" in capsys.readouterr().out
    with pytest.raises(upgrade.UpgradeError, match="finds the candidate itself"):
        upgrade.newest(upgrade.build_parser().parse_args(["--newest", "--triton", "3.9.0"]))
