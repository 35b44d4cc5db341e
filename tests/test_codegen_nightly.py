"""The CPU codegen runner's nightly mode (kperf/stacks/codegen_runner.py ``cmd_nightly``):
an asv run that a signal ended (out of memory, a cancelled job) or that failed fails the
night, and nothing of it is stored for the results branch; asv's own 1 (no new commit) and
2 (a benchmark failed, recorded) do not. asv itself is replaced by a stand-in that returns
the code under test; the real asv runs of the nightly are tests/test_records_archive.py's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kperf.stacks import codegen_runner

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    repo = tmp_path / "repo"
    (repo / ".asv").mkdir(parents=True)
    for name in ("asv.conf.json", "kperf.toml"):
        (repo / name).write_text((REPO / name).read_text())
    seen: dict = {"runs": [], "stored": [], "codes": []}
    monkeypatch.setattr(codegen_runner, "prepare", lambda names: ["clang19", "rocm-7.2.2"])
    monkeypatch.setattr(codegen_runner.asvrun, "codegen_selection",
                        lambda chain: ([r"Registers\.track_value"], {}))
    monkeypatch.setattr(codegen_runner.machine_tool, "describe", lambda name: {"machine": name})
    monkeypatch.setattr(codegen_runner.machine_tool, "write_machine_file", lambda info: None)

    def run_asv(args: list[str], env: dict, where: Path) -> subprocess.CompletedProcess:
        seen["runs"].append(json.loads(Path(args[1]).read_text())["matrix"]["env_nobuild"])
        return subprocess.CompletedProcess(args, seen["codes"][len(seen["runs"]) - 1])

    monkeypatch.setattr(codegen_runner.asvrun, "run_asv", run_asv)
    monkeypatch.setattr(codegen_runner, "collect",
                        lambda *args, **kwargs: seen["stored"].append(args))
    seen["argv"] = ["nightly", "--repo", str(repo), "--out", str(tmp_path / "out")]
    return seen


@pytest.mark.parametrize("second, said", [(-9, "killed by SIGKILL"), (-15, "killed by SIGTERM"),
                                          (3, "exit 3")])
def test_a_killed_or_failed_asv_fails_the_night_and_stores_nothing(
        night: dict, capsys: pytest.CaptureFixture, second: int, said: str) -> None:
    night["codes"] = [0, second]
    assert codegen_runner.main(night["argv"]) == codegen_runner.EXIT_GATE_ERROR
    assert len(night["runs"]) == 2 and night["stored"] == []
    err = capsys.readouterr().err
    assert f"rocm-7.2.2 ({said})" in err and "nothing of this night is stored" in err, err


@pytest.mark.parametrize("codes", [[0, 0], [1, 2], [2, 0]])
def test_asvs_own_codes_store_the_night(night: dict, codes: list[int]) -> None:
    night["codes"] = codes
    assert codegen_runner.main(night["argv"]) == 0
    assert len(night["stored"]) == 1
    assert [run["KPERF_ROCM_TOOLCHAIN"] for run in night["runs"]] == [["clang19"],
                                                                      ["rocm-7.2.2"]]


def test_the_pinned_toolchains_are_clang19_then_rocm_releases_oldest_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pins = {"rocm": {"rocm-7.10.0": {}, "rocm-6.4.4": {}, "rocm-7.2.2": {}}}
    monkeypatch.setattr(codegen_runner.rocm_toolchain, "load_pins", lambda: pins)
    assert codegen_runner.pinned_toolchains() == ["clang19", "rocm-6.4.4", "rocm-7.2.2",
                                                  "rocm-7.10.0"]


def test_each_toolchain_gets_an_asv_environment_of_its_own(tmp_path: Path) -> None:
    from kperf.gate.asvio import load_project_conf

    conf = load_project_conf(REPO / "asv.conf.json")  # asv's JSON has comments
    out = codegen_runner.nightly_config(conf, tmp_path, ["rocm-7.2.2"])
    assert out["matrix"]["env_nobuild"]["KPERF_ROCM_TOOLCHAIN"] == ["rocm-7.2.2"]
    assert out["env_dir"] == str((tmp_path / ".asv" / "env-codegen").resolve())
    assert out["results_dir"] == str((tmp_path / conf["results_dir"]).resolve())
    assert out["matrix"].get("req") == conf.get("matrix", {}).get("req")
