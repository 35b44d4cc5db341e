"""kperf/history/shard.py's parallel shards and the sharded gate: each case judged once on its own
GPU, one site from all shards.

The end-to-end tests run the real suite's CPU-side benchmarks (static figures) on two
fake GPUs (KPERF_FAKE_GPUS) in a clone of the repository, so nothing is written into
this working tree's .asv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kperf import machine as machine_tool
from kperf.gate import asvio
from kperf.history import gpus as host_gpus
from kperf.history import shardmap, shardrun
from tests.test_shard import FAKE

from .conftest import synthetic_thresholds

REPO = Path(__file__).resolve().parent.parent
STATIC = "GemmSharedMem|GemmRegisters"


class _LaneClient:
    """A worker stand-in: answers for one side on one GPU, logging what it measured."""

    def __init__(self, side: str, gpu: str, log: list) -> None:
        self.side, self.gpu, self.log = side, gpu, log

    def shutdown(self) -> None:
        pass

    def request(self, message: dict, timeout_s: float) -> dict:
        if message["op"] == "warm":  # the next pair, started ahead: imports only
            return {"seconds": 0.0, "missing": []}
        name = message["spec"]["case"]
        self.log.append((name, self.gpu))
        t = 1.10 if (name == "s" and self.side == "head") else 1.0
        windows = [{"sm_clock_mhz_median": 1980.0, "power_w_mean": 400.0,
                    "power_limit_w": 700.0, "throttle_bits_or": 0}] * 5
        return {"samples": [t * (1 + 0.0003 * k) for k in range(5)],
                "measurement": {"windows": windows, "telemetry_backend": "nvml"}}


def test_gate_judges_each_case_once_on_its_own_gpu(tmp_path: Path) -> None:
    from kperf.gate import cli
    from kperf.gate.measure import Run
    from kperf.gate.plan import Lane
    from kperf.gate.sequential import exit_code, replay

    own = {"0:0000aa01": ["p", "q"], "1:0000bb02": ["r", "s"]}
    lanes = [Lane(label, machine_tool.gpu_visibility_env(int(label[0]), {}), cases)
             for label, cases in own.items()]
    cases = [{"name": n, "kind": "time", "unit": "seconds",
              "spec": {"op": "rmsnorm", "case": n}} for n in "pqrs"]
    plan = cli.GatePlan(tmp_path, tmp_path, "a" * 40, "b" * 40, "given", "m", cases, lanes)
    log: list = []

    def make_client(slot: str, env: dict, **kw) -> _LaneClient:
        side = "base" if "-base-" in slot else "head"
        return _LaneClient(side, env["CUDA_VISIBLE_DEVICES"], log)

    th = synthetic_thresholds()
    run = Run(plan, th, {"base": tmp_path, "head": tmp_path}, make_client, log=lambda s: None)
    run.run()
    for name, gpu in log:
        assert any(name in cases for label, cases in own.items() if label[0] == gpu), (name, gpu)
    verdicts = {v.case: v for v in replay(run_cases(run), th)}
    assert verdicts["s"].verdict == "SLOW" and verdicts["s"].confirmed, verdicts["s"]
    assert all(verdicts[n].verdict == "SAME" for n in "pqr")
    assert exit_code(list(verdicts.values())) == 1


def run_cases(run):
    from kperf.gate.blocks import case_data

    return case_data(run.plan.cases, run.rows)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("shard-e2e")
    repo = root / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    subprocess.run(["git", "checkout", "-q", "-B", "main"], cwd=repo, check=True)
    home = root / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), **{host_gpus.FAKE_ENV: FAKE})
    pip_conf = Path(os.path.expanduser("~/.config/pip/pip.conf"))
    if pip_conf.exists():  # a new HOME must not lose the offline package index
        env["PIP_CONFIG_FILE"] = str(pip_conf)
    return {"repo": repo, "root": root, "env": env, "home": home}


def _shard(clone: dict, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kperf.history.shard", *args, "--repo", str(clone["repo"]),
           "--host", "e2e"]
    return subprocess.run(cmd, cwd=REPO, env=clone["env"], capture_output=True, text=True,
                          timeout=900)


def _valued_cases(results_dir: Path, machine: str) -> set[str]:
    out = set()
    for path in (results_dir / machine).glob("*-*.json"):
        if path.name == "machine.json":
            continue
        _, cases = asvio.read_results_file(path)
        out |= {name for name, data in cases.items() if data.status == "ok"}
    return out


@pytest.mark.slow
def test_parallel_shards_on_fake_gpus_publish_one_site(clone: dict) -> None:
    proc = _shard(clone, "run", "-b", STATIC)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    repo = clone["repo"]
    results = repo / ".asv" / "results"
    shard_map = shardmap.load_map(shardmap.shard_file(results, "e2e"))
    assert shard_map is not None
    machines = {u: g["machine"] for u, g in shard_map.gpus.items()}
    assert sorted(machines.values()) == ["e2e-fake-h200-0000aa01", "e2e-fake-h200-0000bb02"]
    selected = shardrun.select(shard_map.cases, [STATIC])
    assert len(selected) == 16 and set(shard_map.counts(selected).values()) != {0}
    valued = {u: _valued_cases(results, m) for u, m in machines.items()}
    measured = set().union(*valued.values())
    assert len(measured) >= 10, f"too few static figures came out: {sorted(measured)}"
    assert measured <= set(selected)
    for case in measured:
        holders = [u for u, cases in valued.items() if case in cases]
        assert holders == [shard_map.cases[case]], f"{case}: results on {holders}"
    for machine in machines.values():  # one asv machine per GPU, with its own UUID
        recorded = json.loads((results / machine / "machine.json").read_text())
        assert recorded["machine"] == machine and recorded["gpu"] == "Fake H200"
        assert machine.endswith(machine_tool.uuid_suffix(recorded["gpu_uuid"]))
    index = json.loads((repo / "html" / "index.json").read_text())
    assert set(index["machines"]) == set(machines.values())
    assert all(c in index["benchmarks"] for c in ("bench_gemm.GemmRegisters.track_value",
                                                  "bench_gemm.GemmSharedMem.track_value"))
    for machine in machines.values():
        assert list((repo / "html" / "graphs").rglob(f"machine-{machine}")), machine
    for short in ("0000aa01", "0000bb02"):  # an environment tree of its own per GPU
        assert list((repo / ".asv" / "shards" / short / "env").glob("*/asv-env-info.json"))

    # a third GPU appearing is refused, and nothing is run or rewritten
    before = shardmap.shard_file(results, "e2e").read_text()
    clone["env"][host_gpus.FAKE_ENV] = FAKE + ",GPU-0f6c1a2b-3c4d-5e6f-7a8b-00000000cc03"
    try:
        refused = _shard(clone, "run", "-b", STATIC)
    finally:
        clone["env"][host_gpus.FAKE_ENV] = FAKE
    assert refused.returncode == 2 and "--reassign" in refused.stderr, refused.stderr
    assert shardmap.shard_file(results, "e2e").read_text() == before


@pytest.mark.slow
def test_sharded_gate_names_the_gpu_of_every_case(clone: dict) -> None:
    repo = clone["repo"]
    git_env = dict(clone["env"], GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    subprocess.run(["git", "checkout", "-q", "-B", "docs-only", "main"], cwd=repo, check=True)
    (repo / "NOTE.md").write_text("a change that cannot move a static figure\n")
    subprocess.run(["git", "add", "NOTE.md"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "docs"], cwd=repo, check=True, env=git_env)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    out = clone["root"] / "gate-out"
    proc = _shard(clone, "gate", "--head", "docs-only", "-b", "GemmRegisters",
                  "--out", str(out), "--label", "e2e", "--every-case")
    log = proc.stdout + proc.stderr
    report = json.loads((out / "gate.json").read_text())
    assert proc.returncode == 0, log
    assert report["base_how"].startswith("merge-base with")
    labels = {g["label"]: g for g in report["gpus"]}
    assert len(labels) == 2
    uuids = {label: entry.split("=")[0]
             for label, entry in zip(sorted(labels), FAKE.split(","), strict=True)}
    assert report["cases"], log
    for case in report["cases"]:
        assert case["verdict"] == "SAME" and not case["unchanged"], case  # measured
        assert case["case"] in labels[case["gpu"]]["cases"]
        assert uuids[case["gpu"]] == shardmap.owner(case["case"], uuids.values()), case
    text = (out / "gate.md").read_text()
    assert "| case | GPU |" in text and all(label in text for label in labels)
    head8 = subprocess.run(["git", "rev-parse", "--short=8", "docs-only"], cwd=repo,
                           capture_output=True, text=True).stdout.strip()
    leaked = list((repo / ".asv" / "results").glob(f"*/{head8}-*.json"))
    assert not leaked, "PR results leaked into the published results"
    # a sharded plan that cannot be made is a setup error with its message, not a gate bug
    proc = _shard(clone, "gate", "--head", "docs-only", "-b", "GemmRegisters", "--only", "7",
                  "--out", str(clone["root"] / "gate-out-none"))
    assert proc.returncode == 4 and "none of the" in proc.stderr, proc.stderr
    assert "itself failed" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
