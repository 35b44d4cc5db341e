"""The gate end to end on a CPU: a toy project, a simulated power-capped GPU, the fake SMI.

The toy is a kperf project (kperf.toml, a package built per commit, ``benchmarks/`` made
by ``op_suites``) whose workers are answered by a stand-in handler
(``KPERF_WORKER_HANDLER``, outside the repository) instead of kperf's suite. It times a
simulated GPU through ``kperf.core.timing`` and the real amdsmi package reads the
telemetry from the fake ``libamd_smi.so`` (tests/fake_amdsmi), whose state the handler
writes as a power-capped GPU would have it:

- the code under test (``toykern``) says how many cycles a call takes and how many watts
  it draws per MHz of clock; above the 700 W cap the clock falls to 700 W / (W per MHz)
  and the PPT0 bit is set: a kernel that spends more energy per cycle gets a lower clock;
- a script (``TOY_SCRIPT``, keyed by the side's commit) adds what the environment does:
  a clock lock below the cap, or heat (a TEMP bit and a lower clock).

    c0 (main)     base
    unchanged     c0 + a README edit
    hungrier      c0 + 8% more watts per MHz (same cycles): a code-caused clock drop
    regressed     c0 + 10% more cycles per call
    more_regs     c0 + more registers (a static figure)
    broken        c0 + a kernel that raises
"""

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
from tests.fake_amdsmi import fake_rocm

REPO = Path(__file__).resolve().parent.parent
MACHINE = "gate-e2e"

KPERF_TOML = '[kperf]\nops = "toykern"\n'

PACKAGE = """\
WORK_MCYCLES = {work}  # millions of cycles per call
WATTS_PER_MHZ = {watts}  # board power per MHz of clock while the kernel runs
REGISTERS = {regs}


def check():
    if {broken}:
        raise RuntimeError("illegal memory access in toy kernel")
"""

BENCH = '''\
"""The toy's suites: one timed case, and its registers for sm_90a."""

from kperf.suites import op_suites

(ToyTime, ToyEnergy, ToyRegisters, ToyScratch, ToySharedMem, ToyOccupancy, ToyCodeSize,
 ToyCompile) = op_suites("toy", __name__, codegen_case="small", cases=["small"],
                         dtypes=["fp16"], backends=["toy"], targets=["sm_90a"])
'''

CASE = '''\
"""A simulated power-capped GPU whose telemetry the fake libamd_smi.so reports."""

import json
import os
import random
import time
from pathlib import Path

from kperf.core import timing
from kperf.core.telemetry import open_source

CAP_W, MAX_MHZ = 700.0, 2100.0


class _Event:
    def __init__(self, gpu):
        self.gpu = gpu

    def record(self):
        self.t = self.gpu.now

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class SimGpu:
    name = "toy-gpu"
    supports_graphs = False

    def __init__(self):
        self.now = 0.0

    def event(self):
        return _Event(self)

    def synchronize(self):
        pass

    def flush_l2(self, by_reading=False):
        self.now += 1e-6

    def hold(self, seconds):
        self.now += seconds

    def capture(self, calls):
        raise NotImplementedError


def _script(kern):
    path = os.environ.get("TOY_SCRIPT")
    table = json.loads(Path(path).read_text()) if path else {}
    where = Path(kern.__file__).as_posix()
    return next((v for k, v in table.items() if f"/sides/{k}" in where), {})


def _state(**values):
    with open(os.environ["FAKE_AMDSMI_STATE"], "a") as f:
        for k, v in values.items():
            f.write(f"{k} {int(v)}\\n")


def handle(request):
    import toykern

    toykern.check()
    if request["op"] == "warm":  # a worker started ahead of its turn: imports only
        return {"seconds": 0.0, "missing": []}
    if request["op"] == "prepare":
        return {"config": {}, "first_call_s": 0.0, "max_abs_err": 0.0}
    if request["op"] == "static":
        return {"figures": {"registers": toykern.REGISTERS}, "artifacts": ["toy"]}
    script = _script(toykern)
    time.sleep(float(script.get("sleep", 0.0)))  # a slow block, for interrupting a run
    mhz, watts, bits = MAX_MHZ, toykern.WATTS_PER_MHZ * MAX_MHZ, 0
    if watts > CAP_W:  # the power controller lowers the clock until the cap holds
        mhz, watts, bits = CAP_W / toykern.WATTS_PER_MHZ, CAP_W, 0x1
    if "lock_mhz" in script and script["lock_mhz"] < mhz:  # a clock lock from outside
        mhz, bits = script["lock_mhz"], 0
        watts = toykern.WATTS_PER_MHZ * mhz
    if script.get("hot"):  # heat: a TEMP_HOTSPOT bit and 10% off the clock
        mhz, bits = mhz * 0.9, bits | (1 << 36)
    _state(sclk_mhz=mhz, power_w=watts, power_cap_uw=CAP_W * 1e6, indep_throttle=bits)
    gpu, rng = SimGpu(), random.Random()

    def call():
        gpu.now += toykern.WORK_MCYCLES / mhz * (1 + rng.gauss(0, 0.003))

    plan = timing.Plan(trials=request["plan"]["trials"], min_trial_s=0.02, min_reps=5,
                       max_reps=50, warmup_min_s=0.0, settle_trials=2, settle_tol=0.05,
                       energy_s=0, flush_l2=False)
    source = open_source("amdsmi")
    try:
        m = timing.measure([call], gpu, plan, source)
    finally:
        source.close()
    return {"measurement": m.as_record(), "samples": m.samples, "number": m.number,
            "measured_at": time.time(), "pid": os.getpid()}
'''


def _package(repo: Path, work: float = 100.0, watts: float = 0.40, regs: int = 64,
             broken: bool = False) -> None:
    (repo / "toykern" / "__init__.py").write_text(
        PACKAGE.format(work=work, watts=watts, regs=regs, broken=broken))


def _thresholds() -> dict:
    th = json.loads((DEFAULTS / "thresholds.json").read_text())
    th["rules"] = [{"match": r"\.ToyRegisters\.", "class": "static"},
                   {"match": ".*", "class": "compute"}]
    th["pr_subset"] = [r"ToyTime\.", r"ToyRegisters\."]
    return th


def _build_toy(root: Path) -> dict[str, str]:
    repo = root / "toy"
    (repo / "toykern").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    shutil.copy(REPO / "benchmarks" / "__init__.py", repo / "benchmarks" / "__init__.py")
    (repo / "benchmarks" / "bench_toy.py").write_text(BENCH)
    (root / "toy_handler.py").write_text(CASE)
    (repo / "kperf.toml").write_text(KPERF_TOML)
    _package(repo)
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "toykern", "repo": ".", "branches": ["main"],
        "results_dir": ".asv/results", "html_dir": ".asv/html"}))
    (repo / "thresholds.json").write_text(json.dumps(_thresholds(), indent=1))
    (repo / ".gitignore").write_text(".asv/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    shas = {"base": _commit(repo, "c0 base")}
    for branch, change in (("unchanged", lambda: (repo / "README").write_text("docs\n")),
                           ("hungrier", lambda: _package(repo, watts=0.432)),
                           ("regressed", lambda: _package(repo, work=110.0)),
                           ("more_regs", lambda: _package(repo, regs=96)),
                           ("broken", lambda: _package(repo, broken=True))):
        _git(repo, "checkout", "-q", "-b", branch, "main")
        change()
        shas[branch] = _commit(repo, branch)
    _git(repo, "checkout", "-q", "main")
    return shas


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("gate-e2e")
    shas = _build_toy(root)
    rocm = fake_rocm()
    env = dict(os.environ, ROCM_PATH=str(rocm), KPERF_TELEMETRY="amdsmi", KPERF_DEVICE="cpu",
               KPERF_WORKER_DIR=str(root / "workers"), KPERF_WORKER_IDLE_S="30",
               KPERF_WORKER_HANDLER=f"{root / 'toy_handler.py'}:handle")
    for var in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                "ROCM_HOME"):
        env.pop(var, None)
    return {"repo": root / "toy", "root": root, "env": env, **shas}


def _gate(toy: dict, head: str, name: str, script: dict | None = None,
          extra: tuple[str, ...] = ()) -> tuple[int, dict, str]:
    env = dict(toy["env"], FAKE_AMDSMI_STATE=str(toy["root"] / f"smi-{name}"))
    (toy["root"] / f"smi-{name}").write_text("")
    if script is not None:
        path = toy["root"] / f"script-{name}.json"
        path.write_text(json.dumps(script))
        env["TOY_SCRIPT"] = str(path)
    out = toy["root"] / f"out-{name}"
    cmd = [sys.executable, "-m", "kperf.gate", "--repo", str(toy["repo"]), "--head", head,
           "--machine", MACHINE, "--out", str(out), "--label", name,
           "--pr-dir", str(toy["root"] / f"pr-{name}"), *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    report = json.loads((out / "gate.json").read_text())
    return proc.returncode, report, proc.stdout + proc.stderr


def _case(report: dict, fragment: str) -> dict:
    return next(c for c in report["cases"] if fragment in c["case"])


@pytest.mark.slow
def test_a_commit_that_leaves_an_ops_code_alone_is_same_unmeasured(toy: dict) -> None:
    """A README change: the toy's package is byte for byte the same at base and head, so
    its cases are SAME without a block measured, no worker started."""
    code, report, log = _gate(toy, "unchanged", "untouched")
    assert report["base"] == toy["base"], "base must default to the merge-base with main"
    assert report["base_how"] == "merge-base with main"
    for fragment in ("ToyTime", "ToyRegisters"):
        case = _case(report, fragment)
        assert case["verdict"] == "SAME" and case["unchanged"] is True, log
        assert case["rounds"] == 0 and "not measured: toy's code is the same" in case["reason"]
    assert not (toy["root"] / "pr-untouched" / "blocks.jsonl").exists(), log
    assert "nothing to measure" in report["stopped"]
    assert "2 same (2 of them not measured: code unchanged)" in \
        (toy["root"] / "out-untouched" / "gate.md").read_text()
    assert code == 0, log
    again, second, log = _gate(toy, "unchanged", "untouched", extra=("--no-run",))
    assert again == 0 and _case(second, "ToyTime")["unchanged"] is True, log
    # a change of the toy's code is measured, though the README did not change
    code, report, log = _gate(toy, "regressed", "regressed-digest", extra=("--max-rows", "5"))
    assert _case(report, "ToyTime")["unchanged"] is False and code == 1, log


@pytest.mark.slow
def test_unchanged_commit_passes(toy: dict) -> None:
    code, report, log = _gate(toy, "unchanged", "unchanged", extra=("--every-case",))
    assert report["base"] == toy["base"], "base must default to the merge-base with main"
    assert report["base_how"] == "merge-base with main"
    timed = _case(report, "ToyTime")
    assert timed["verdict"] == "SAME", log
    assert timed["rounds"] == 3, "an unchanged case is decided at the first look"
    assert timed["clock_base_mhz"] == pytest.approx(1750, abs=1)
    assert _case(report, "ToyRegisters")["verdict"] == "SAME"
    assert code == 0, log
    assert not (toy["repo"] / ".asv" / "results").exists(), "PR results leaked into history"


@pytest.mark.slow
def test_code_that_draws_more_power_is_slow_with_the_reason(toy: dict) -> None:
    # 8% more watts per MHz: at the 700 W cap the clock falls 1750 -> 1620 MHz and each
    # call takes 8% longer in the same cycles. Users get the slower kernel: SLOW.
    code, report, log = _gate(toy, "hungrier", "hungrier")
    timed = _case(report, "ToyTime")
    assert timed["verdict"] == "SLOW", log
    assert timed["attribution"] == "code"
    assert timed["confirmed"] is True, "SLOW must survive the re-measure by fresh workers"
    assert timed["ratio"] == pytest.approx(1.08, rel=0.01)
    assert timed["cycles_ratio"] == pytest.approx(1.0, abs=0.005)
    energy = re.search(r"energy per call \+(\d+\.\d)%", timed["reason"])
    assert energy and float(energy.group(1)) == pytest.approx(8.0, abs=0.5), timed["reason"]
    assert "700 W power limit" in timed["reason"]
    at_equal_clocks = re.search(r"at equal clocks x(\d\.\d+)", timed["reason"])
    assert at_equal_clocks and float(at_equal_clocks.group(1)) == pytest.approx(1.0, abs=0.005)
    assert code == 1, log


@pytest.mark.slow
def test_an_outside_clock_lock_with_unchanged_code_is_not_slow(toy: dict) -> None:
    # The head's GPU is locked at 1500 MHz (not by the code: it is below the power limit
    # there). Time +17%, cycles unchanged: the environment's doing, and cycles must agree.
    script = {toy["unchanged"][:12]: {"lock_mhz": 1500}}
    code, report, log = _gate(toy, "unchanged", "locked", script, extra=("--every-case",))
    timed = _case(report, "ToyTime")
    assert timed["ratio"] > 1.15, "the scripted lock did not slow the head"
    assert timed["attribution"] == "environment", log
    assert timed["verdict"] != "SLOW", log
    assert "from outside" in timed["reason"]
    assert code in (0, 3), log


@pytest.mark.slow
def test_heat_with_unchanged_code_is_not_slow(toy: dict) -> None:
    script = {toy["unchanged"][:12]: {"hot": True}}
    code, report, log = _gate(toy, "unchanged", "hot", script, extra=("--every-case",))
    timed = _case(report, "ToyTime")
    assert timed["attribution"] == "environment" and timed["verdict"] != "SLOW", log
    assert code in (0, 3), log


@pytest.mark.slow
def test_more_work_is_slow_and_rereading_the_run_gives_the_same_verdicts(toy: dict) -> None:
    code, report, log = _gate(toy, "regressed", "regressed")
    timed = _case(report, "ToyTime")
    assert timed["verdict"] == "SLOW" and timed["confirmed"] is True, log
    assert timed["attribution"] == "none" and timed["ratio"] == pytest.approx(1.10, rel=0.01)
    assert code == 1, log
    md = (toy["root"] / "out-regressed" / "gate.md").read_text()
    assert md.index("ToyTime") < md.index("ToyRegisters"), "worst case must come first"
    rounds = (toy["root"] / "out-regressed" / "rounds.md").read_text()
    row = next(line for line in rounds.splitlines() if "ToyTime" in line)
    assert "| SLOW |" in row and "(re)" in row, rounds
    per_round = [float(x) for x in re.findall(r"([+-]\d+\.\d+) \(", row)]
    assert len(per_round) >= 4 and all(9.5 < x < 10.5 for x in per_round), rounds  # +10% each
    again, second, log2 = _gate(toy, "regressed", "regressed", extra=("--no-run",))
    assert again == code, log2
    assert [(c["case"], c["verdict"], c["ratio"]) for c in second["cases"]] == \
        [(c["case"], c["verdict"], c["ratio"]) for c in report["cases"]]


@pytest.mark.slow
def test_a_static_figure_change_is_exact(toy: dict) -> None:
    code, report, log = _gate(toy, "more_regs", "more_regs")
    regs = _case(report, "ToyRegisters")
    assert regs["verdict"] == "SLOW" and regs["before"] == 64 and regs["after"] == 96, log
    assert _case(report, "ToyTime")["verdict"] == "SAME"
    assert code == 1
    # every worker the run started was stopped when it ended (the static figures' ones
    # too): a live worker keeps its socket in the workers' folder
    assert sorted(p.name for p in (toy["root"] / "workers").glob("*.sock")) == [], log


@pytest.mark.slow
def test_a_kernel_that_breaks_at_head_exits_2(toy: dict) -> None:
    code, report, log = _gate(toy, "broken", "broken")
    timed = _case(report, "ToyTime")
    assert timed["broke"] is True and "illegal memory access" in timed["reason"], log
    assert code == 2, log


@pytest.mark.slow
def test_an_interrupted_gate_keeps_every_block_and_resumes(toy: dict) -> None:
    """SIGTERM (a CI timeout, a device call's limit) mid-run: exit 4 with a report that
    says so, every block measured so far kept; --resume goes on and decides."""
    import signal
    import time

    name = "interrupted"
    env = dict(toy["env"], FAKE_AMDSMI_STATE=str(toy["root"] / f"smi-{name}"))
    (toy["root"] / f"smi-{name}").write_text("")
    script = toy["root"] / f"script-{name}.json"
    script.write_text(json.dumps({toy["unchanged"][:12]: {"sleep": 0.4},
                                  toy["base"][:12]: {"sleep": 0.4}}))
    env["TOY_SCRIPT"] = str(script)
    pr, out = toy["root"] / f"pr-{name}", toy["root"] / f"out-{name}"
    cmd = [sys.executable, "-m", "kperf.gate", "--repo", str(toy["repo"]), "--head",
           "unchanged", "--machine", MACHINE, "--out", str(out), "--pr-dir", str(pr),
           "--every-case"]
    log_path = toy["root"] / f"log-{name}.txt"  # a file: nobody reads a pipe while we poll
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log_file,
                                stderr=subprocess.STDOUT, text=True)
    blocks = pr / "blocks.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (
            not blocks.exists() or len(blocks.read_text().splitlines()) < 4):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    log = log_path.read_text()
    kept = blocks.read_text().splitlines()
    assert proc.returncode == 4, log
    report = json.loads((out / "gate.json").read_text())
    assert "interrupted" in report["error"] and "--resume" in report["error"]
    assert len(kept) >= 4 and all(json.loads(line) for line in kept)
    resumed = subprocess.run([*cmd, "--resume"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=600)
    final = json.loads((out / "gate.json").read_text())
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _case(final, "ToyTime")["verdict"] == "SAME"
    assert blocks.read_text().splitlines()[:len(kept)] == kept, "nothing measured was lost"
