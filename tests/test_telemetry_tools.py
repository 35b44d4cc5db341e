"""Provenance (kperf/machine.py) and the telemetry pages (kperf/site/telemetry_pages.py),
against fakes."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from kperf import machine
from kperf.core import record
from kperf.site import telemetry_pages
from tests.fake_amdsmi import FakeState, use_fake_amdsmi
from tests.test_telemetry_nvml import fake_pynvml

ROCM_TORCH_STACK = {"torch": "2.13.0+rocm7.0", "cuda": "", "hip": "7.0.51831", "triton": "3.7.1",
                    "tilelang": "0.1.15", "gpu": "AMD Instinct MI300X",
                    "arch": "gfx942:sramecc+:xnack-", "num_gpus": 1}


@pytest.fixture
def amd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeState:
    state = use_fake_amdsmi(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as on a ROCm box: NVML is not there
    return state


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("KPERF_TELEMETRY", raising=False)
    return mod


# ----------------------------------------------------------------- provenance
def test_machine_description_has_the_amd_fields(amd: FakeState,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "probe_stack", lambda python=sys.executable: ROCM_TORCH_STACK)
    amd.set(power_cap_uw=650_000_000, perf_level=8, temp_hotspot_c=81)
    info = machine.describe()
    assert info["gpu"] == "AMD Instinct MI300X" and info["gpu_arch"] == "gfx942:sramecc+:xnack-"
    assert info["rocm"] == "7.0.2-fake"  # $ROCM_PATH/.info/version
    assert info["gpu_uuid"].startswith("GPU-fa4e0000") and info["gpu_serial"].endswith("E0000")
    assert info["driver"] == "6.12.12-fake" and info["vbios"] == "022.040.003.043.000001"
    assert info["power_cap_w"] == "650.0" and info["power_cap_default_w"] == "750.0"
    assert info["perf_level"] == "DETERMINISM" and info["sm_clock_locked"] == "True"
    assert info["telemetry"] == "amdsmi" and info["amdsmi_version"] == "7.0.2"
    assert info["machine"].endswith("-amd-instinct-mi300x-00000000")
    # conditions that change from run to run stay out of the machine file
    assert not [k for k in info if k.startswith("now_") or k == "telemetry_reason"]
    full = machine.provenance("box")
    assert full["machine"]["machine"] == "box"
    assert full["gpu_state"]["now_temp_hotspot_c"] == 81
    assert "pyrsmi 1.1.0" in full["gpu_state"]["telemetry_reason"]
    assert full["software"]["torch_hip"] == "7.0.51831" and full["software"]["pyrsmi"] == "1.1.0"
    assert re.fullmatch(r"[0-9a-f]{40}", full["software"]["harness_commit"])


def test_machine_description_has_the_nvml_clock_state(nvml: types.ModuleType,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    stack = {**ROCM_TORCH_STACK, "gpu": "NVIDIA H200", "arch": "sm_90", "hip": "", "cuda": "13.0"}
    monkeypatch.setattr(machine, "probe_stack", lambda python=sys.executable: stack)
    info, state, _ = machine._gather(None)
    assert info["gpu_arch"] == "sm_90" and info["gpu_sm"] == "sm_90"
    assert info["cuda"] == "13.0" and info["cuda_driver"] == "13.0"
    assert info["power_limit_w"] == "700.0" and info["power_limit_is_default"] == "True"
    assert info["app_clocks_are_default"] == "True" and info["gpu_serial"] == "165432101234"
    assert state["now_sm_clock_mhz"] == 1755 and state["now_clock_event_reasons"] == 0x4


# ----------------------------------------------------------------- clocks
# ----------------------------------------------------------------- pages
def _window(sm: float, sm_min: float, bits: int | None, temp: float = 60.0) -> dict:
    return {"n_readings": 10, "sm_clock_mhz_min": sm_min, "sm_clock_mhz_median": sm,
            "sm_clock_mhz_mean": sm, "mem_clock_mhz_median": 3201.0, "temperature_c_max": temp,
            "power_w_mean": 650.0, "throttle_bits_or": bits, "energy_j": None}


def _write(root: Path, monkeypatch: pytest.MonkeyPatch, commit: str, machine_name: str,
           windows: list[dict], backend: str = "nvml", reason: str = "NVML",
           case: str = "m4096") -> None:
    monkeypatch.setenv("ASV_COMMIT", commit)
    monkeypatch.setenv("KPERF_MACHINE", machine_name)
    monkeypatch.setenv("ASV_ENV_NAME", "env1")
    measurement = {"samples": [1e-3 + i * 1e-6 for i in range(len(windows))], "number": 50,
                   "mode": "events", "settled": True, "telemetry_backend": backend,
                   "telemetry_reason": reason, "windows": windows}
    record.write_record("bench_gemm.GemmTime.track_time",
                        {"case": case, "dtype": "fp16", "backend": "triton"},
                        {"kind": "time", "measurement": measurement, "gpu": "NVIDIA H200",
                         "recorded_at": 1.0 if commit.startswith("a") else 2.0}, root)


def test_telemetry_page_from_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "records"
    _write(root, monkeypatch, "a" * 40, "h200-1",
           [_window(1700, 1690, 0x4), _window(1650, 1400, 0x4 | 0x40, temp=88)])
    _write(root, monkeypatch, "b" * 40, "mi300x-1",
           [_window(2100, 2100, 1 << 36), _window(2100, 2050, 0)], backend="amdsmi",
           reason="amdsmi 7.0.2; throttle bits: indep_throttle_status")
    (root / "not-a-timing.json").write_text(json.dumps({"schema": "x", "kind": "static"}))
    page = telemetry_pages.write_telemetry_pages(tmp_path / "html", root)
    data = json.loads((tmp_path / "html" / "kperf" / "telemetry.json").read_text())
    points = {p["machine"]: p for p in data["points"]}
    assert set(points) == {"h200-1", "mi300x-1"}
    h200 = points["h200-1"]
    assert h200["commit"] == "a" * 40 and h200["params"]["case"] == "m4096"
    assert h200["sm_clock_median_mhz"] == 1675 and h200["sm_clock_min_mhz"] == 1400
    assert h200["mem_clock_median_mhz"] == 3201 and h200["temperature_max_c"] == 88
    assert h200["power_mean_w"] == 650 and h200["throttle_bits_or"] == 0x44
    assert h200["throttle_names"] == ["SwPowerCap", "HwThermalSlowdown"]
    assert h200["throttle_unusual"] == 0x40  # the power cap is the normal state; thermal is not
    assert [s["throttle_bits_or"] for s in h200["per_sample"]] == [0x4, 0x44]
    mi300 = points["mi300x-1"]
    assert mi300["throttle_bits_or"] == 1 << 36 and mi300["throttle_names"] == ["TEMP_HOTSPOT"]
    assert mi300["throttle_unusual"] == 1 << 36
    html = page.read_text()
    inline = re.search(r'<script type="application/json" id="kperf-data">(.*?)</script>', html,
                       re.S)
    assert inline and json.loads(inline.group(1))["points"] == data["points"]


def test_telemetry_page_escapes_and_handles_no_records(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    page = telemetry_pages.write_telemetry_pages(tmp_path / "html", tmp_path / "missing")
    assert json.loads((page.parent / "telemetry.json").read_text())["points"] == []
    root = tmp_path / "records"
    # a machine name cannot carry markup (records refuse names that are not one plain
    # folder name); a parameter can
    _write(root, monkeypatch, "c" * 40, "h200-1", [_window(1000, 900, None)],
           reason="</script><b>x", case="</script><b>x")
    html = telemetry_pages.write_telemetry_pages(tmp_path / "html2", root).read_text()
    assert "</script><b>" not in html and html.count("</script>") == 2
    (root / "broken.json").write_text("{")
    # a bad record is skipped with a visible warning; the page and its other rows stay
    html3 = telemetry_pages.write_telemetry_pages(tmp_path / "html3", root).read_text()
    data = json.loads((tmp_path / "html3" / "kperf" / "telemetry.json").read_text())
    assert len(data["points"]) == 1
    assert [s["where"] for s in data["skipped"]] == ["records/broken.json"]
    assert "not valid JSON" in data["skipped"][0]["what"]
    assert 'id="warnings"' in html3 and "records/broken.json" in html3
    assert str(tmp_path) not in html3  # no build-machine path on the page


def test_machine_file_survives_concurrent_writers(tmp_path: Path) -> None:
    """Shards write their machine entries at once; no entry is lost, no reader sees half."""
    import multiprocessing as mp

    from kperf.machine import write_machine_file

    path = tmp_path / ".asv-machine.json"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, i)) for i in range(4)]
    for p in procs:
        p.start()
    for _ in range(200):  # read while they write: always whole JSON
        if path.exists():
            json.loads(path.read_text())
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = json.loads(path.read_text())
    assert {f"m{i}-{j}" for i in range(4) for j in range(20)} <= set(data)
    write_machine_file({"machine": "last"}, path)


def _write_many(path: Path, i: int) -> None:
    from kperf.machine import write_machine_file

    for j in range(20):
        write_machine_file({"machine": f"m{i}-{j}"}, path)


def test_throttle_bits_are_ored_and_none_only_when_never_read() -> None:
    from kperf.core.telemetry import or_bits

    assert or_bits([0x4, None, 0x20, 0x4]) == 0x24
    assert or_bits([0, None]) == 0  # read and clear is not "unknown"
    assert or_bits([None, None]) is None and or_bits([]) is None
