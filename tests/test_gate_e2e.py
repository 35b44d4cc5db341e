"""The gate end to end: a temporary git repository with a CPU-measurable benchmark.

The toy project has the real layout (asv.conf.json, a package built per commit, the
harness loaded from the working tree) and one benchmark timed by ``harness.timing``
through a CPU stand-in for the device, with telemetry from a scripted source: a JSON
file maps a commit to the clock (and throttle bits) its samples report, and the work
scales with 1 / clock the way a compute-bound kernel does. Commits:

    c0 (main)       base
    unchanged       c0 + a README edit
    regressed       c0 + twice the work per call
    history         unchanged + twice the work + another README edit (for tools.bisect)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MACHINE = "gate-e2e"

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "toykern"
version = "0.1.0"

[tool.setuptools]
packages = ["toykern"]
"""

PACKAGE = """\
import time

WORK_S = {work}
REGISTERS = 64


def work(scale: float) -> None:
    # Sleeping stands in for device work: unlike a busy loop, its duration hardly depends
    # on the other processes sharing this machine's two cores.
    time.sleep(WORK_S * scale)
"""

ASV_CONF = {
    "version": 1, "project": "toykern", "repo": ".", "branches": ["main"], "dvcs": "git",
    "environment_type": "virtualenv",
    "matrix": {"req": {"pip+asv_runner": ["0.3.2"]}},
    "build_command": ["python -m pip wheel --no-deps --no-build-isolation --no-index "
                      "-w {build_cache_dir} {build_dir}"],
    "install_command": ["in-dir={env_dir} python -m pip install --no-deps --no-index "
                        "--force-reinstall {wheel_file}"],
    "uninstall_command": ["return-code=any python -m pip uninstall -y {project}"],
    "benchmark_dir": "benchmarks", "env_dir": ".asv/env", "results_dir": ".asv/results",
    "html_dir": ".asv/html", "launch_method": "spawn", "default_benchmark_timeout": 120,
}

THRESHOLDS = {
    "schema": "kperf-thresholds-1", "alpha": 0.01, "correction": "bh", "ci_level": 0.99,
    "min_samples": 6, "clock_tolerance": 0.02, "benign_throttle_bits": {"scripted": "0x4"},
    "classes": {"compute": {"min_ratio": 0.15}, "static": {"exact": True}},
    "rules": [{"match": r"\.ToyRegisters\.", "class": "static"},
              {"match": ".*", "class": "compute"}],
}

BENCH = '''\
"""A CPU benchmark measured by the real harness, with scripted telemetry."""

import json
import os
import time
from pathlib import Path

from harness import record, timing
from harness.telemetry import Reading

NOMINAL_MHZ = 1980.0


class _Event:
    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class _CpuDevice:
    name = "toy-cpu"
    supports_graphs = False

    def event(self):
        return _Event()

    def synchronize(self):
        pass

    def flush_l2(self):
        pass

    def hold(self, seconds):
        pass

    def capture(self, calls):
        raise NotImplementedError


class _ScriptedSource:
    backend = "scripted"
    lag_s = 0.0
    reason = "clocks scripted by the test (TOY_CLOCKS)"

    def __init__(self, clock_mhz, bits):
        self.clock_mhz, self.bits = clock_mhz, bits

    def read(self):
        return Reading(t=time.perf_counter(), sm_clock_mhz=self.clock_mhz,
                       throttle_bits=self.bits)

    def identity(self):
        return {}

    def close(self):
        pass


def _script():
    path = os.environ.get("TOY_CLOCKS")
    table = json.loads(Path(path).read_text()) if path else {}
    return table.get(os.environ.get("ASV_COMMIT", "")[:8], table.get("default", {}))


class ToyTime:
    params = (["small"],)
    param_names = ("case",)
    timeout = 120

    def setup(self, case):
        import toykern

        self.kern = toykern

    def track_time(self, case):
        script = _script()
        clock = float(script.get("sm_clock_mhz", NOMINAL_MHZ))
        source = _ScriptedSource(clock, int(script.get("throttle_bits", 4)))
        scale = NOMINAL_MHZ / clock
        plan = timing.Plan(trials=8, min_trial_s=0.02, min_reps=3, max_reps=50,
                           warmup_min_s=0.0, warmup_max_s=0.1, flush_l2=False)
        m = timing.measure([lambda: self.kern.work(scale)], _CpuDevice(), plan, source)
        record.write_record("bench_toy.ToyTime.track_time", {"case": case},
                            {"kind": "time", "measurement": m.as_record()})
        return m.asv_result()

    track_time.unit = "seconds"


class ToyRegisters:
    def setup(self):
        import toykern

        self.value = toykern.REGISTERS

    def track_value(self):
        return self.value

    track_value.unit = "registers"
'''


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e")
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _build_toy(root: Path) -> dict[str, str]:
    repo = root / "toy"
    (repo / "toykern").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    shutil.copytree(REPO / "harness", repo / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "benchmarks" / "__init__.py", repo / "benchmarks" / "__init__.py")
    (repo / "benchmarks" / "bench_toy.py").write_text(BENCH)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "toykern" / "__init__.py").write_text(PACKAGE.format(work=0.002))
    (repo / "asv.conf.json").write_text(json.dumps(ASV_CONF, indent=1))
    (repo / "thresholds.json").write_text(json.dumps(THRESHOLDS, indent=1))
    (repo / ".gitignore").write_text(".asv/\n.cache/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    shas = {"base": _commit(repo, "c0 base")}
    _git(repo, "checkout", "-q", "-b", "unchanged")
    (repo / "README").write_text("docs only\n")
    shas["unchanged"] = _commit(repo, "docs")
    _git(repo, "checkout", "-q", "-b", "regressed", "main")
    (repo / "toykern" / "__init__.py").write_text(PACKAGE.format(work=0.004))
    shas["regressed"] = _commit(repo, "twice the work")
    # a linear history for the bisect helper: c0 -> docs -> regression -> docs
    _git(repo, "checkout", "-q", "-b", "history", "unchanged")
    (repo / "toykern" / "__init__.py").write_text(PACKAGE.format(work=0.004))
    shas["history_regression"] = _commit(repo, "history: twice the work")
    (repo / "README").write_text("more docs\n")
    shas["history_tip"] = _commit(repo, "history: docs")
    _git(repo, "checkout", "-q", "main")
    return shas


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("gate-e2e")
    shas = _build_toy(root)
    home = root / "home"
    home.mkdir()
    (home / ".asv-machine.json").write_text(json.dumps(
        {"version": 1, MACHINE: {"machine": MACHINE, "arch": "x86_64", "os": "Linux"}}))
    env = dict(os.environ, HOME=str(home))
    pip_conf = Path(os.path.expanduser("~/.config/pip/pip.conf"))
    if pip_conf.exists():  # a new HOME must not lose the offline package index
        env["PIP_CONFIG_FILE"] = str(pip_conf)
    return {"repo": root / "toy", "root": root, "env": env, **shas}


def _gate(toy: dict, head: str, name: str, clocks: dict | None = None,
          rounds: int = 3) -> tuple[int, dict, str]:
    env = dict(toy["env"])
    if clocks is not None:
        path = toy["root"] / f"clocks-{name}.json"
        path.write_text(json.dumps(clocks))
        env["TOY_CLOCKS"] = str(path)
    out = toy["root"] / f"out-{name}"
    cmd = [sys.executable, "-m", "tools.gate", "--repo", str(toy["repo"]), "--head", head,
           "--machine", MACHINE, "-b", "Toy", "--rounds", str(rounds), "--out", str(out),
           "--label", name]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    report = json.loads((out / "gate.json").read_text())
    return proc.returncode, report, proc.stdout + proc.stderr


def _case(report: dict, fragment: str) -> dict:
    return next(c for c in report["cases"] if fragment in c["case"])


@pytest.mark.slow
def test_unchanged_commit_passes(toy: dict) -> None:
    code, report, log = _gate(toy, "unchanged", "unchanged")
    assert report["base"] == toy["base"], "base must default to the merge-base with main"
    assert report["base_how"] == "merge-base with main"
    time_case = _case(report, "ToyTime")
    assert time_case["verdict"] == "SAME", log
    assert time_case["n_base"] >= 18 and time_case["n_head"] >= 18
    assert time_case["clock_base_mhz"] == pytest.approx(1980)
    assert _case(report, "ToyRegisters")["verdict"] == "SAME"
    assert code == 0, log
    assert not (toy["repo"] / ".asv" / "results" / MACHINE).exists(), \
        "PR results leaked into the published results directory"


@pytest.mark.slow
def test_injected_regression_exits_1(toy: dict) -> None:
    code, report, log = _gate(toy, "regressed", "regressed")
    time_case = _case(report, "ToyTime")
    assert time_case["verdict"] == "SLOW", log
    assert time_case["confirmed"] is True, "a SLOW verdict must survive the re-measure"
    assert time_case["ratio"] > 1.5
    assert report["remeasured"] is True
    assert (toy["repo"] / ".asv" / "pr-results" / "confirm").is_dir()
    assert code == 1, log
    md = (toy["root"] / "out-regressed" / "gate.md").read_text()
    assert md.index("ToyTime") < md.index("ToyRegisters"), "worst case must come first"


@pytest.mark.slow
def test_clock_drop_without_code_change_is_not_slow(toy: dict) -> None:
    # The head's samples report 1400 MHz instead of 1980 and take 1980/1400 = 1.41x as long,
    # as a compute-bound kernel would: same cycles, no code change.
    head8 = toy["unchanged"][:8]
    code, report, log = _gate(toy, "unchanged", "clockdrop",
                              clocks={head8: {"sm_clock_mhz": 1400}}, rounds=3)
    time_case = _case(report, "ToyTime")
    assert time_case["ratio"] > 1.25, "the scripted clock drop did not slow the head"
    assert time_case["clock_head_mhz"] == pytest.approx(1400)
    assert time_case["verdict"] in ("INCONCLUSIVE", "SAME"), log
    assert "clocks differed" in time_case["reason"]
    assert 0.85 < time_case["cycles_ratio"] < 1.15
    assert code in (0, 3), log


@pytest.mark.slow
def test_bisect_names_the_commit_that_regressed(toy: dict) -> None:
    case = "bench_toy.ToyTime.track_time('small')"
    cmd = [sys.executable, "-m", "tools.bisect", toy["base"], "history", case,
           "--repo", str(toy["repo"]), "--machine", MACHINE]
    proc = subprocess.run(cmd, cwd=REPO, env=toy["env"], capture_output=True, text=True,
                          timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert f"greatest regression at {toy['history_regression'][:7]}" in log
    assert (toy["repo"] / ".asv" / "bisect-results" / MACHINE).is_dir()
    assert not (toy["repo"] / ".asv" / "results" / MACHINE).exists()
