"""The stack matrix: stacks as separate lines, and stack-vs-stack verdicts like the gate.

Fast tests cover the pieces (site discovery, pins, derived config, stack selection and
verdicts on hand-made asv result files). The slow test runs a real asv matrix over two
Triton releases (wheels that tools/test.sh downloaded before the run, tests/_wheels.py) on
the CPU-side benchmarks, publishes it, and compares the two stacks with
kperf.stacks.stackcmp.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from kperf.project import DEFAULTS
from kperf.stacks import matrix, stackcmp
from tests._wheels import MATRIX_TRITON as TRITON_VERSIONS  # downloaded before the run

REPO = Path(__file__).resolve().parent.parent
MACHINE = "stack-matrix-test"
CASES = (r"^bench_gemm\.Gemm(Registers|Scratch|SharedMem|Compile)\.track_\w+"
         r"\('gfx942', 'fp16', 'triton'\)$")


# --------------------------------------------------------------------------- site dirs


def test_sites_of_a_venv_with_system_site_packages_include_the_base(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv made over a base interpreter that holds the stack: both dirs, venv first."""
    # importing TileLang (earlier tests do) puts its TVM path into this process's PYTHONPATH
    monkeypatch.delenv("PYTHONPATH", raising=False)
    venv.create(tmp_path / "v", system_site_packages=True, with_pip=False)
    python = tmp_path / "v" / "bin" / "python"
    found = matrix.probe_sites(str(python))
    own = str((tmp_path / "v" / "lib").resolve())
    assert found["python"] == "{}.{}".format(*sys.version_info[:2])
    assert found["dirs"][0].startswith(own), found
    base_sites = subprocess.run(
        [str(python), "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert any(d.startswith(os.path.realpath(base_sites)) for d in found["dirs"][1:]), \
        f"base site-packages of {base_sites} missing: {found}"
    assert not any(d.endswith("lib-dynload") for d in found["dirs"]), "stdlib leaked in"


def test_sites_of_a_plain_venv_exclude_the_base(tmp_path: Path) -> None:
    venv.create(tmp_path / "v", system_site_packages=False, with_pip=False)
    extra = tmp_path / "extra"
    extra.mkdir()
    python = tmp_path / "v" / "bin" / "python"
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(extra)  # an image that sets PYTHONPATH: kept
    try:
        found = matrix.probe_sites(str(python))
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = env_before
    prefix = subprocess.run([str(python), "-c", "import sys; print(sys.base_prefix)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert str(extra.resolve()) in found["dirs"]
    assert not any(d.startswith(os.path.realpath(prefix) + "/lib") for d in found["dirs"]), found


def test_probe_names_a_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(matrix.MatrixError, match="no-such-python"):
        matrix.probe_sites(str(tmp_path / "no-such-python"))


@pytest.mark.parametrize(("info", "name"), [
    ({"gpu": "AMD Instinct MI300X", "rocm": "6.4.1-120", "torch": "2.6.0+rocm6.4.1.git1ded221",
      "triton": "3.2.0+rocm6.4.1.git6da9e660", "tilelang": "0.1.15"},
     "mi300x-rocm6.4-torch2.6-triton3.2-tilelang0.1.15"),
    ({"gpu": "NVIDIA H200", "cuda": "13.0", "torch": "2.11.0+cu130", "triton": "3.6.0",
      "tilelang": ""}, "h200-cuda13.0-torch2.11-triton3.6"),
    ({"gpu": "none", "torch": "2.13.0+cpu", "triton": "3.7.1", "tilelang": "0.1.15"},
     "cpu-torch2.13-triton3.7.1-tilelang0.1.15"),
])
def test_stack_machine_names(info: dict, name: str) -> None:
    from kperf import machine

    assert machine.stack_name(info) == name


# --------------------------------------------------------------------------- pins, config


def test_tilelang_versions_get_their_own_companion_pins(monkeypatch) -> None:
    monkeypatch.setitem(matrix.COMPANIONS, "tilelang",
                        ("apache-tvm-ffi", {"0.1.9": "0.1.5", "0.1.15": "0.1.12"}))
    req, excludes = matrix.matrix_pins({"tilelang": ["0.1.9", "0.1.15"], "triton": []})
    assert req == {"tilelang": ["0.1.9", "0.1.15"], "apache-tvm-ffi": ["0.1.12", "0.1.5"]}
    assert {"req": {"tilelang": "0.1.9", "apache-tvm-ffi": "0.1.12"}} in excludes
    assert {"req": {"tilelang": "0.1.15", "apache-tvm-ffi": "0.1.5"}} in excludes
    assert len(excludes) == 2


def test_pins_reject_duplicates_and_nothing(capsys) -> None:
    with pytest.raises(matrix.MatrixError, match="twice"):
        matrix.matrix_pins({"triton": ["3.8.0", "3.8.0"]})
    with pytest.raises(matrix.MatrixError, match="twice"):
        matrix.prepare_toolchains(["clang19", "clang19"])
    assert matrix.main(["pip", "--triton", "3.7.1"]) == 2
    assert "at least two stacks" in capsys.readouterr().err
    assert matrix.main(["pip", "--rocm-toolchain", "rocm-0.0.1", "clang19"]) == 2
    assert "rocm-0.0.1: not in rocm-toolchains.json" in capsys.readouterr().err


def test_rocm_toolchains_are_environments_built_once(tmp_path: Path) -> None:
    """Each toolchain is an asv environment of its own (its own result file and graph
    line) that shares the one build of the commit: asv's env_nobuild."""
    conf = {"repo": ".", "matrix": {"req": {"pip+asv_runner": ["0.3.2"]}}}
    out = matrix.matrix_config(conf, REPO, tmp_path, {}, [], "3.11", ["clang19", "rocm-7.2.2"])
    assert out["matrix"]["env_nobuild"] == {"KPERF_ROCM_TOOLCHAIN": ["clang19", "rocm-7.2.2"]}
    assert out["matrix"]["req"] == {"pip+asv_runner": ["0.3.2"]}


def test_matrix_config_adds_pins_and_moves_results(tmp_path: Path) -> None:
    conf = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from asv import util; "
         "print(json.dumps(util.load_json('asv.conf.json', js_comments=True)))"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout)
    out = matrix.matrix_config(conf, REPO, tmp_path, {"triton": list(TRITON_VERSIONS)}, [],
                               "3.11")
    assert out["matrix"]["req"]["triton"] == list(TRITON_VERSIONS)
    assert out["matrix"]["req"]["pip+asv_runner"] == ["0.3.2"], "the runner pin must stay"
    assert out["results_dir"] == str(tmp_path / "results")
    assert out["html_dir"] == str(tmp_path / "html")
    assert out["pythons"] == ["3.11"]
    assert any("-m kperf.stacks.asv_stack_site" in c for c in out["install_command"])
    with pytest.raises(matrix.MatrixError, match="asv_runner"):
        matrix.matrix_config(conf, REPO, tmp_path, {"pip+asv_runner": ["0.3.1"]}, [], "3.11")


def test_every_stack_times_the_baseline_and_the_compiles(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack comparison needs both stacks' figures at its commit: a stack whose torch and
    kernels did not change since it last ran must not skip them, as a day's run does."""
    monkeypatch.setenv("KPERF_COMPILE", "changed")
    monkeypatch.setenv("KPERF_KERNELS", "changed")
    env = matrix.stack_env("m", {"dirs": [str(tmp_path)]}, sys.executable, REPO, True,
                           tmp_path / "records")
    assert env["KPERF_BASELINE"] == env["KPERF_COMPILE"] == env["KPERF_KERNELS"] == "every"
    assert env["KPERF_RECORD_DIR"] == str(tmp_path / "records")


def test_image_config_keeps_the_history_but_separates_environments() -> None:
    conf = {"repo": ".", "results_dir": ".asv/results", "html_dir": "html",
            "env_dir": ".asv/env", "install_command": ["python {conf_dir}/tools/x.py"]}
    a = matrix.image_config(conf, REPO, "mi300x-rocm6.3-torch2.6-triton3.2", "3.12")
    b = matrix.image_config(conf, REPO, "mi300x-rocm6.4-torch2.7-triton3.3", "3.12")
    assert a["results_dir"] == b["results_dir"] == str(REPO / ".asv" / "results")
    assert a["html_dir"] == str(REPO / "html")
    assert a["env_dir"] != b["env_dir"]
    assert a["env_dir"].endswith("env-stacks/mi300x-rocm6.3-torch2.6-triton3.2")
    assert a["pythons"] == ["3.12"]
    assert a["install_command"] == [f"python {REPO}/tools/x.py"]


# --------------------------------------------------------------------------- stackcmp


COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples"]


def _results_file(root: Path, machine: str, commit: str, env: str, params: dict,
                  rows: dict) -> None:
    path = root / machine / f"{commit[:8]}-{env}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 2, "commit_hash": commit, "env_name": env,
                                "params": params, "result_columns": COLUMNS,
                                "results": rows}))


def _row(values: list, samples: list | None = None) -> list:
    row = [values, [["'gfx942'"]], "v", 0, 1.0]
    if samples is None:
        return row
    return row + [None] * 6 + [samples]


@pytest.fixture()
def two_stacks(tmp_path: Path) -> dict:
    """One commit, two machines (image per release) with one env each, hand-made results in
    three rounds (results folders), both stacks in each, as kperf.stacks.matrix measures them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q",
                    "--allow-empty", "-m", "c"], cwd=repo, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout.strip()
    (repo / "thresholds.json").write_text((DEFAULTS / "thresholds.json").read_text())
    rounds = [tmp_path / f"round-{r}" / "results" for r in (1, 2, 3)]
    for r, results in enumerate(rounds):
        results.mkdir(parents=True)
        (results / "benchmarks.json").write_text(json.dumps({
            "bench_gemm.GemmTime.track_time": {"unit": "seconds"},
            "bench_gemm.GemmRegisters.track_value": {"unit": "registers"}}))
        fast = [(1.00e-3 + i * 1e-6) * (1 + 0.002 * r) for i in range(12)]
        slow = [(1.30e-3 + i * 1e-6) * (1 + 0.002 * r) for i in range(12)]
        for machine, rocm, times, regs in (("mi300x-rocm6.3", "6.3", fast, 128.0),
                                           ("mi300x-rocm6.4", "6.4", slow, 160.0)):
            _results_file(results, machine, commit, "virtualenv-py3.12",
                          {"machine": machine, "rocm": rocm, "python": "3.12"}, {
                              "bench_gemm.GemmTime.track_time": _row([sorted(times)[6]],
                                                                     [times]),
                              "bench_gemm.GemmRegisters.track_value": _row([regs]),
                          })
    return {"repo": repo, "results": rounds, "commit": commit, "out": tmp_path / "out"}


def _stackcmp(s: dict, base: str, head: str) -> tuple[int, dict]:
    folders = [arg for results in s["results"] for arg in ("--results", str(results))]
    code = stackcmp.main(["--repo", str(s["repo"]), *folders,
                          "--base", base, "--head", head, "--out", str(s["out"]),
                          "--label", "unit"])
    return code, json.loads((s["out"] / "stackcmp.json").read_text())


def test_stackcmp_flags_a_slower_stack_like_the_gate(two_stacks: dict) -> None:
    code, report = _stackcmp(two_stacks, "machine=mi300x-rocm6.3", "rocm=6.4")
    by_case = {c["case"].split(".")[1]: c for c in report["cases"]}
    assert by_case["GemmTime"]["verdict"] == "SLOW"
    assert by_case["GemmTime"]["ratio"] == pytest.approx(1.3, rel=0.01)
    assert by_case["GemmRegisters"]["verdict"] == "SLOW"
    # asv's results give the count alone, not the kernel's occupancy: not forgiven
    assert by_case["GemmRegisters"]["reason"].startswith("costs: unknown")
    assert code == 1 and report["exit_code"] == 1 and report["status"] == "REGRESSION"
    assert report["schema"] == "kperf-gate-2"
    md = (two_stacks["out"] / "stackcmp.md").read_text()
    assert "### Stack comparison — unit" in md and "rocm 6.3" in md and "rocm 6.4" in md
    assert "| case | before | after | ratio [interval] | clocks | rounds | verdict |" in md


def test_stackcmp_reverse_direction_is_fast_and_passes(two_stacks: dict) -> None:
    code, report = _stackcmp(two_stacks, "rocm=6.4", "rocm=6.3")
    assert {c["verdict"] for c in report["cases"]} == {"FAST"}
    assert code == 0


def test_stackcmp_missing_base_stack_is_no_baseline(two_stacks: dict) -> None:
    code, report = _stackcmp(two_stacks, "rocm=6.2", "rocm=6.4")
    assert code == 3 and "no baseline" in report["error"] and "rocm=6.2" in report["error"]
    code, report = _stackcmp(two_stacks, "rocm=6.3", "rocm=7.0")
    assert code == 2 and "no results for the head stack" in report["error"]


def test_stackcmp_ambiguous_selector_names_the_files(two_stacks: dict) -> None:
    code, report = _stackcmp(two_stacks, "python=3.12", "rocm=6.4")
    assert code == 3 and "matches 2 results files" in report["error"]
    with pytest.raises(Exception, match="KEY=VALUE"):
        stackcmp.parse_selector("rocm", "--base")


# --------------------------------------------------------------------------- real asv


def _git_clone(dest: Path) -> str:
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True)
    # asv publishes the history of branch main: a clone made from another branch names its
    # checked-out commit main
    subprocess.run(["git", "checkout", "-q", "-B", "main"], cwd=dest, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True,
                          text=True, check=True).stdout.strip()


def _env_triton(env_root: Path, version: str) -> str:
    """The Triton an asv environment of the matrix really imports."""
    for info in env_root.glob("*/asv-env-info.json"):
        if json.loads(info.read_text()).get("requirements", {}).get("triton") == version:
            python = info.parent / "bin" / "python"
            return subprocess.run([str(python), "-c", "import triton; print(triton.__version__)"],
                                  cwd="/", capture_output=True, text=True,
                                  check=True).stdout.strip()
    raise AssertionError(f"no asv environment pinned to triton {version} under {env_root}")


def _clone_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"))
    pip_conf = Path.home() / ".config" / "pip" / "pip.conf"
    if pip_conf.exists():  # a new HOME must not lose the configured package index
        env["PIP_CONFIG_FILE"] = str(pip_conf)
    return env


@pytest.mark.slow
def test_real_matrix_over_two_rocm_toolchains(tmp_path: Path) -> None:
    """One commit's gfx942 figures under Debian's LLVM 19 and ROCm 7.2.2's LLVM: two result
    files and graph lines, one build; stackcmp decides each static figure exactly."""
    from kperf.core import hip

    clone = tmp_path / "repo"
    commit = _git_clone(clone)
    env = _clone_env(tmp_path)
    assert env[hip.ROOT_ENV], "conftest names the installed toolchains for clones"
    cases = (r"^bench_gemm\.Gemm(Registers|CodeSize)\.track_value"
             r"\('gfx942', 'fp16', '(tilelang|triton)'\)$")
    run = [sys.executable, "-m", "kperf.stacks.matrix", "pip", "--repo", str(clone),
           "--rocm-toolchain", "clang19", "rocm-7.2.2", "--machine", MACHINE, "-b", cases]
    proc = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.stdout.count("Building") + proc.stderr.count("Building") <= 1, "built twice"
    out = clone / ".asv" / "matrix"
    files = sorted(p.name for p in (out / "results" / MACHINE).glob(f"{commit[:8]}-*.json"))
    assert len(files) == 2 and all("KPERF_ROCM_TOOLCHAIN" in f for f in files), files
    index = json.loads((out / "html" / "index.json").read_text())
    assert sorted(index["params"]["env-KPERF_ROCM_TOOLCHAIN"]) == ["clang19", "rocm-7.2.2"]
    report_dir = tmp_path / "report"
    cmp = [sys.executable, "-m", "kperf.stacks.stackcmp", "--repo", str(clone), "--results",
           str(out / "results"), "--base", "env-KPERF_ROCM_TOOLCHAIN=clang19",
           "--head", "env-KPERF_ROCM_TOOLCHAIN=rocm-7.2.2", "--out", str(report_dir)]
    subprocess.run(cmp, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    report = json.loads((report_dir / "stackcmp.json").read_text())
    verdicts = {c["case"]: c for c in report["cases"]}
    assert len(verdicts) == 4, verdicts
    for name, c in verdicts.items():
        expected = "SAME" if c["after"] == c["before"] else (
            "SLOW" if c["after"] > c["before"] else "FAST")
        assert c["verdict"] == expected, c
        if "'triton'" in name:  # Triton brings its own LLVM: no toolchain changes its code
            assert c["verdict"] == "SAME", c
    tilelang_size = next(c for n, c in verdicts.items() if "CodeSize" in n and "tilelang" in n)
    assert tilelang_size["after"] != tilelang_size["before"], "ROCm 7.2.2 made clang-19's code"


@pytest.mark.slow
def test_real_matrix_over_two_triton_releases(tmp_path: Path) -> None:
    clone = tmp_path / "repo"
    commit = _git_clone(clone)
    env = _clone_env(tmp_path)
    run = [sys.executable, "-m", "kperf.stacks.matrix", "pip", "--repo", str(clone),
           "--triton", *TRITON_VERSIONS, "--machine", MACHINE, "-b", CASES, "-a", "rounds=2"]
    proc = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout[-6000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, log

    out = clone / ".asv" / "matrix"
    files = sorted(p.name for p in (out / "results" / MACHINE).glob(f"{commit[:8]}-*.json"))
    py = "{}.{}".format(*sys.version_info[:2])
    assert files == [f"{commit[:8]}-virtualenv-py{py}-triton{v}.json" for v in TRITON_VERSIONS]
    for version in TRITON_VERSIONS:
        assert _env_triton(clone / ".asv" / "env", version) == version

    index = json.loads((out / "html" / "index.json").read_text())
    assert sorted(index["params"]["triton"]) == list(TRITON_VERSIONS), index["params"]
    assert MACHINE in index["machines"]
    for version in TRITON_VERSIONS:  # one graph per stack: separate lines, none overwritten
        graphs = list((out / "html" / "graphs").rglob(
            f"triton-{version}/**/bench_gemm.GemmScratch.track_value.json"))
        assert len(graphs) == 1, f"triton {version}: {graphs}"

    report_dir = tmp_path / "report"
    cmp = [sys.executable, "-m", "kperf.stacks.stackcmp", "--repo", str(clone), "--results",
           str(out / "results"), "--base", f"triton={TRITON_VERSIONS[0]}",
           "--head", f"triton={TRITON_VERSIONS[1]}", "--out", str(report_dir)]
    done = subprocess.run(cmp, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    report = json.loads((report_dir / "stackcmp.json").read_text())
    assert report["base_params"]["triton"] == TRITON_VERSIONS[0]
    assert report["head_params"]["triton"] == TRITON_VERSIONS[1]
    cases = {c["case"].split("(")[0].split(".")[1]: c for c in report["cases"]}
    assert set(cases) == {"GemmRegisters", "GemmScratch", "GemmSharedMem", "GemmCompile"}
    for name in ("GemmRegisters", "GemmScratch", "GemmSharedMem"):
        c = cases[name]  # static figures: the verdict must follow the two stored values
        expected = "SAME" if c["after"] == c["before"] else (
            "SLOW" if c["after"] > c["before"] else "FAST")
        assert c["verdict"] == expected, c
    compile_case = cases["GemmCompile"]
    # one results folder is one round: a timing needs rounds (docs/gate.md), so the
    # compile times are read and shown, and left undecided
    assert compile_case["rounds"] == 1 and compile_case["before"] and compile_case["after"]
    assert compile_case["verdict"] == "INCONCLUSIVE", compile_case
    assert "1 of at least 3 rounds" in compile_case["reason"], compile_case
    assert done.returncode == report["exit_code"], done.stdout + done.stderr
    md = (report_dir / "stackcmp.md").read_text()
    assert f"triton {TRITON_VERSIONS[0]}" in md and f"triton {TRITON_VERSIONS[1]}" in md
