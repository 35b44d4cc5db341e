"""kperf/history/shard.py: the stable case -> GPU assignment, the shards' -b regexes, per-GPU
machines. tests/test_shard_gate.py runs shards and the sharded gate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kperf import machine as machine_tool
from kperf.history import gpus as host_gpus
from kperf.history import shard, shardmap, shardrun
from tests.test_telemetry_nvml import fake_pynvml

REPO = Path(__file__).resolve().parent.parent
UUIDS = [f"GPU-{i:08x}-5e6f-7a8b-9c0d-{0xA0 + i:012x}" for i in range(8)]
FAKE = "GPU-0f6c1a2b-3c4d-5e6f-7a8b-00000000aa01=Fake H200," \
       "GPU-0f6c1a2b-3c4d-5e6f-7a8b-00000000bb02=Fake H200"


def _gpus(n: int, start: int = 0) -> list[host_gpus.Gpu]:
    return [host_gpus.Gpu(i, UUIDS[i], "Fake H200", "fake") for i in range(start, start + n)]


def _cases(n: int, offset: int = 0) -> list[str]:
    return [f"bench_op{i % 7}.Op{i % 7}Time.track_time('case-{i}', 'fp16', 'triton')"
            for i in range(offset, offset + n)]


def _machines(gpus: list[host_gpus.Gpu]) -> dict[str, str]:
    return {g.uuid: machine_tool.machine_name("box", g.model, g.uuid) for g in gpus}


def _plan(gpus, cases, recorded=None, reassign=None) -> tuple[shardmap.ShardMap, list[str]]:
    return shardmap.update_map(recorded, gpus, _machines(gpus), cases, "box", reassign)


# ----------------------------------------------------------------- the assignment


def test_same_case_same_gpu_across_runs_and_gpu_order() -> None:
    gpus, cases = _gpus(4), _cases(300)
    first, _ = _plan(gpus, cases)
    again, _ = _plan(list(reversed(gpus)), list(reversed(cases)))
    assert first.cases == again.cases
    assert set(first.cases.values()) == {g.uuid for g in gpus}
    recorded, notes = _plan(gpus, cases, recorded=first)
    assert recorded.cases == first.cases and notes == []


def test_new_cases_leave_every_old_case_where_it_was() -> None:
    gpus = _gpus(4)
    old, _ = _plan(gpus, _cases(200))
    grown, notes = _plan(gpus, _cases(200) + _cases(100, offset=200), recorded=old)
    assert {c: grown.cases[c] for c in old.cases} == old.cases
    assert len(grown.cases) == 300 and notes == ["100 new case(s) assigned"]
    assert grown.history == old.history  # new cases are not a reassignment


def test_balanced_over_eight_gpus() -> None:
    counts = _plan(_gpus(8), _cases(800))[0].counts()
    assert min(counts.values()) >= 70 and max(counts.values()) <= 130, counts


def test_changed_gpu_set_is_refused_without_reassign() -> None:
    old, _ = _plan(_gpus(4), _cases(400))
    with pytest.raises(host_gpus.ShardError) as err:
        _plan(_gpus(5), _cases(400), recorded=old)
    text = str(err.value)
    assert UUIDS[4] in text and "--reassign" in text and "never moved" in text
    assert re.search(r"\b\d+ of 400 would move", text)
    with pytest.raises(host_gpus.ShardError, match=re.escape(UUIDS[3])):
        _plan(_gpus(3), _cases(400), recorded=old)  # a GPU gone is refused too


def test_added_gpu_takes_only_its_share_and_the_move_is_recorded() -> None:
    old, _ = _plan(_gpus(4), _cases(400))
    new, notes = _plan(_gpus(5), _cases(400), recorded=old, reassign="fifth GPU installed")
    moved = {c for c in old.cases if new.cases[c] != old.cases[c]}
    assert all(new.cases[c] == UUIDS[4] for c in moved), "a case moved between old GPUs"
    assert 0.1 * 400 < len(moved) < 0.3 * 400
    entry = new.history[-1]
    assert entry["event"] == "reassigned" and entry["reason"] == "fifth GPU installed"
    assert entry["added"] == [UUIDS[4]] and entry["removed"] == []
    assert entry["moved"] == {c: [old.cases[c], UUIDS[4]] for c in sorted(moved)}
    assert entry["n_moved"] == len(moved) and re.match(r"\d{4}-\d\d-\d\dT", entry["date"])
    assert notes[0].startswith(f"reassigned (fifth GPU installed): {len(moved)} of 400")


def test_removed_gpu_moves_only_its_cases_and_restoring_restores() -> None:
    full, _ = _plan(_gpus(4), _cases(400))
    gone = UUIDS[2]
    less, _ = _plan([g for g in _gpus(4) if g.uuid != gone], _cases(400), recorded=full,
                    reassign="GPU 2 sent for repair")
    moved = {c for c in full.cases if less.cases[c] != full.cases[c]}
    assert moved == {c for c, u in full.cases.items() if u == gone}
    assert gone not in less.cases.values() and gone not in less.gpus
    back, _ = _plan(_gpus(4), _cases(400), recorded=less, reassign="GPU 2 back")
    assert back.cases == full.cases, "the same GPU set must give the same assignment"
    assert [h["event"] for h in back.history] == ["created", "reassigned", "reassigned"]


def test_shard_file_round_trip_and_errors_name_the_file(tmp_path: Path) -> None:
    path = shardmap.shard_file(tmp_path / "results", "Box.Lab")
    assert path == tmp_path / "results" / "shards" / "box-lab.shardmap"
    assert shardmap.load_map(path) is None
    made, _ = _plan(_gpus(2), _cases(20))
    shardmap.save_map(path, made)
    loaded = shardmap.load_map(path)
    assert loaded is not None and loaded.cases == made.cases and loaded.gpus == made.gpus
    path.write_text("{broken")
    with pytest.raises(host_gpus.ShardError, match=re.escape(str(path))):
        shardmap.load_map(path)
    raw = made.to_json()
    raw["cases"][_cases(1)[0]] = "GPU-nowhere"
    path.write_text(json.dumps(raw))
    with pytest.raises(host_gpus.ShardError, match="GPU-nowhere"):
        shardmap.load_map(path)


def test_cli_refuses_a_changed_gpu_set_before_running(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "asv.conf.json").write_text(json.dumps({"version": 1, "repo": ".",
                                                    "results_dir": ".asv/results"}))
    recorded, _ = _plan(_gpus(3), _cases(30))
    path = shardmap.shard_file(repo / ".asv" / "results", "box")
    shardmap.save_map(path, recorded)
    before = path.read_text()
    monkeypatch.setenv(host_gpus.FAKE_ENV, ",".join(UUIDS[:2]))
    code = shard.main(["run", "--repo", str(repo), "--host", "box"])
    assert code == 2
    assert path.read_text() == before, "a refused run must not touch the assignment"


# ----------------------------------------------------------------- -b regexes


def _meta() -> dict:
    params = [["'a.b'", "'x(1)'", "'[y]+'", "'q|r'", "'é ü'"], ["'fp16'", "'bf16'"]]
    return {"version": 2,
            "bench_p.P.track_time": {"name": "bench_p.P.track_time", "params": params},
            "bench_p.P.track_timex": {"name": "bench_p.P.track_timex", "params": params},
            "bench_q.Q.track_value": {"name": "bench_q.Q.track_value", "params": []}}


def _asv_selects(meta: dict, regexes: list[str]) -> set[str]:
    """What asv itself selects with these -b regexes."""
    from asv.benchmarks import Benchmarks

    listed = [v for v in meta.values() if isinstance(v, dict)]
    chosen = Benchmarks(types.SimpleNamespace(benchmark_dir="benchmarks"), listed, regexes)
    cases = shardrun.benchmark_cases(meta)
    out = set()
    for name in chosen:
        picked = chosen.benchmark_selection[name]
        out |= set(cases[name]) if picked is None else {cases[name][i] for i in picked}
    return out


@pytest.mark.parametrize("per_regex", [64, 2])
def test_each_shards_regexes_select_exactly_its_cases_in_asv(monkeypatch, per_regex) -> None:
    monkeypatch.setattr(shardrun, "MAX_ALTERNATIVES", per_regex)
    meta = _meta()
    per_bench = shardrun.benchmark_cases(meta)
    every = [c for cases in per_bench.values() for c in cases]
    assert "bench_p.P.track_time('x(1)', 'bf16')" in every and "bench_q.Q.track_value" in every
    gpus = _gpus(3)
    made, _ = _plan(gpus, every)
    union = set()
    for g in gpus:
        mine = [c for c in every if made.cases[c] == g.uuid]
        assert _asv_selects(meta, shardrun.shard_regexes(mine, per_bench)) == set(mine)
        union |= set(mine)
    assert union == set(every)
    whole = per_bench["bench_p.P.track_time"]
    assert shardrun.shard_regexes(whole, per_bench) == [r"^bench_p\.P\.track_time\("]


def test_a_users_filter_has_asvs_meaning() -> None:
    every = [c for cases in shardrun.benchmark_cases(_meta()).values() for c in cases]
    picked = shardrun.select(every, ["track_time\\(", "'bf16'\\)$"])
    assert picked == [c for c in every if "track_time(" in c or c.endswith("'bf16')")]
    assert shardrun.select(every, []) == every


# ----------------------------------------------------------------- GPUs and machines


def test_fake_gpus_give_one_machine_each(monkeypatch, tmp_path: Path) -> None:
    gpus = host_gpus.enumerate_gpus({host_gpus.FAKE_ENV: FAKE})
    assert [g.index for g in gpus] == [0, 1] and [g.short for g in gpus] == ["0000aa01",
                                                                          "0000bb02"]
    base = {"machine": "box-cpu", "gpu": "none", "os": "Linux", "torch": "2.13.0"}
    monkeypatch.setattr(machine_tool, "describe", lambda *a, **k: dict(base))
    infos = host_gpus.describe_machines(gpus, "Box")
    names = [infos[g.uuid]["machine"] for g in gpus]
    assert names == ["box-fake-h200-0000aa01", "box-fake-h200-0000bb02"]
    assert all(infos[g.uuid]["gpu_uuid"] == g.uuid for g in gpus)
    assert infos[gpus[0].uuid]["gpu"] == "Fake H200" and infos[gpus[0].uuid]["torch"] == "2.13.0"
    path = tmp_path / "asv-machine.json"
    for info in infos.values():
        machine_tool.write_machine_file(info, path)
    written = json.loads(path.read_text())
    assert set(written) == {"version", *names}
    with pytest.raises(host_gpus.ShardError, match="same name"):
        host_gpus.enumerate_gpus({host_gpus.FAKE_ENV: "GPU-1-00000001,GPU-2-00000001"})
    with pytest.raises(host_gpus.ShardError, match="no UUID"):
        host_gpus.enumerate_gpus({host_gpus.FAKE_ENV: "GPU-1,=model"})


def test_machine_name_matches_describes_own_naming() -> None:
    uuid = "GPU-8f2c1a2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b"
    assert machine_tool.machine_name("node7.lab", "NVIDIA H200", uuid) == \
        "node7-lab-nvidia-h200-1e2f3a4b"
    assert machine_tool.machine_name("node7", None, "") == "node7-cpu"


def test_visibility_env_shows_one_gpu_in_pci_order() -> None:
    env = machine_tool.gpu_visibility_env(3, {"ROCR_VISIBLE_DEVICES": "0,1", "KEEP": "1",
                                              "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert env == {"KEEP": "1", "CUDA_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "3",
                   "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_describe_gpu_asks_a_child_that_sees_only_that_gpu(monkeypatch) -> None:
    seen: dict = {}
    said = {"info": {"machine": "box-nvidia-h200-0000aaaa",
                     "gpu_uuid": "GPU-12345678-0000-0000-0000-00000000aaaa"},
            "stack": {"gpu_torch_uuid": "12345678-0000-0000-0000-00000000aaaa", "hip": ""}}

    def child(cmd, **kw):
        seen.update(kw["env"])
        return subprocess.CompletedProcess(cmd, 0, "a warning\n" + json.dumps(said) + "\n", "")

    monkeypatch.setattr(machine_tool.subprocess, "run", child)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "1")
    assert machine_tool.describe_gpu(5) == said["info"]
    assert seen["CUDA_VISIBLE_DEVICES"] == seen["HIP_VISIBLE_DEVICES"] == "5"
    assert seen["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and "ROCR_VISIBLE_DEVICES" not in seen
    said["stack"]["gpu_torch_uuid"] = "12345678-0000-0000-0000-00000000bbbb"
    with pytest.raises(RuntimeError, match="number the GPUs differently"):
        machine_tool.describe_gpu(5)
    said["stack"]["hip"] = "7.0"  # ROCm formats torch's UUID its own way: not compared
    assert machine_tool.describe_gpu(5) == said["info"]


def test_nvidia_gpus_from_nvml_honour_cuda_visible_devices(monkeypatch) -> None:
    nvml = fake_pynvml()
    nvml.nvmlDeviceGetCount = lambda: 4
    nvml.nvmlDeviceGetSerial = lambda h: f"16543210{h:04d}"
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    every = host_gpus._nvidia_gpus({})
    assert [g.index for g in every] == [0, 1, 2, 3]
    assert every[2].uuid == "GPU-00000002-fake" and every[2].serial == "165432100002"
    assert every[0].model == "NVIDIA H200" and every[0].vendor == "nvidia"
    assert [g.index for g in host_gpus._nvidia_gpus({"CUDA_VISIBLE_DEVICES": "3,1"})] == [3, 1]
    assert [g.index for g in host_gpus._nvidia_gpus({"CUDA_VISIBLE_DEVICES": "GPU-00000002"})] \
        == [2]
    assert host_gpus._nvidia_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert [g.index for g in host_gpus._nvidia_gpus({"CUDA_VISIBLE_DEVICES": "1,9,2"})] == [1]
    assert nvml.calls.count(("init",)) == nvml.calls.count(("shutdown",)) == 5


def test_amd_gpus_from_amdsmi_honour_hip_visible_devices(monkeypatch, tmp_path) -> None:
    from tests.fake_amdsmi import use_fake_amdsmi

    state = use_fake_amdsmi(monkeypatch, tmp_path)
    state.set(ngpu=3)
    every = host_gpus._amd_gpus(dict(os.environ))
    assert [g.index for g in every] == [0, 1, 2] and len({g.uuid for g in every}) == 3
    assert all(g.vendor == "amd" and g.uuid for g in every)
    picked = host_gpus._amd_gpus({**os.environ, "HIP_VISIBLE_DEVICES": "2,0"})
    assert [g.index for g in picked] == [2, 0] and picked[0].uuid == every[2].uuid
    assert "HIP_VISIBLE_DEVICES" not in os.environ, "the caller's environment must be restored"
