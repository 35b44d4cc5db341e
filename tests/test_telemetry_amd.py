"""AMD telemetry against a fake libamd_smi.so, driven through the real amdsmi 7.0.2 and
pyrsmi 1.1.0 packages, and the sysfs fallback against a fake /sys tree."""

from __future__ import annotations

import ctypes
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kperf.core.telemetry import Sampler, open_source, summarize
from kperf.core.telemetry.amd import AmdSmiSource, AmdSmiUnavailable, visible_physical_index
from kperf.core.telemetry.sysfs import (
    GPU_METRICS_LAYOUTS,
    SysfsSource,
    SysfsUnavailable,
    current_level_mhz,
    parse_throttle,
)
from tests.fake_amdsmi import FakeState, fake_rocm, use_fake_amdsmi

REPO = Path(__file__).resolve().parent.parent
PPT0, SPL = 1 << 0, 1 << 4  # SMU_THROTTLER_* bits of indep_throttle_status: power
TEMP_HOTSPOT, TEMP_MEM = 1 << 36, 1 << 34  # thermal


@pytest.fixture
def amd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeState:
    return use_fake_amdsmi(monkeypatch, tmp_path)


def _sample(source: AmdSmiSource | SysfsSource, seconds: float) -> tuple[float, float]:
    t0 = time.perf_counter()
    time.sleep(seconds)
    return t0, time.perf_counter()


# ----------------------------------------------------------------- layouts
def test_fake_struct_layouts_match_the_amdsmi_package(amd: FakeState) -> None:
    from amdsmi import amdsmi_wrapper

    lib = ctypes.CDLL(str(fake_rocm() / "lib" / "libamd_smi.so"))
    lib.fake_layout.restype = ctypes.c_long
    lib.fake_layout.argtypes = [ctypes.c_char_p]
    lib.fake_layout_name.restype = ctypes.c_char_p
    names = [lib.fake_layout_name(i).decode() for i in range(lib.fake_layout_count())]
    assert len(names) > 20
    for name in names:
        struct_name, _, field = name.partition(".")
        cls = getattr(amdsmi_wrapper, struct_name)
        expected = getattr(cls, field).offset if field else ctypes.sizeof(cls)
        assert lib.fake_layout(name.encode()) == expected, name


def test_sysfs_v1_3_layout_agrees_with_amdsmi_metrics_struct(amd: FakeState) -> None:
    # amdsmi's unified struct starts with the kernel's gpu_metrics_v1_3 fields
    from amdsmi.amdsmi_wrapper import amdsmi_gpu_metrics_t

    v1_3 = GPU_METRICS_LAYOUTS[(1, 3)]
    for field in ("throttle_status", "indep_throttle_status", "energy_accumulator"):
        assert getattr(v1_3, field).offset == getattr(amdsmi_gpu_metrics_t, field).offset
    # hand-derived from kgd_pp_interface.h (natural alignment)
    assert GPU_METRICS_LAYOUTS[(1, 4)].throttle_status.offset == 40
    assert GPU_METRICS_LAYOUTS[(1, 5)].throttle_status.offset == 104
    assert GPU_METRICS_LAYOUTS[(1, 6)].throttle_status.offset == 128


# ----------------------------------------------------------------- amdsmi source
def test_reading_and_identity_from_amdsmi_and_pyrsmi(amd: FakeState) -> None:
    amd.set(sclk_mhz=1850, mclk_mhz=1300, temp_edge_c=41, temp_hotspot_c=77, temp_mem_c=63,
            power_w=612, energy_acc=2_000_000, indep_throttle=PPT0 | TEMP_HOTSPOT)
    source = open_source("amdsmi")
    try:
        reading = source.read()
        ident = source.identity()
    finally:
        source.close()
    assert source.backend == "amdsmi"
    assert "pyrsmi 1.1.0 (amdsmi package)" in source.reason
    assert reading.sm_clock_mhz == 1850 and reading.mem_clock_mhz == 1300
    assert reading.temperature_c == 77  # the hottest of edge / hotspot / memory
    assert reading.power_w == 612
    assert reading.throttle_bits == PPT0 | TEMP_HOTSPOT  # raw bits, not amdsmi's bool
    assert reading.energy_j == pytest.approx(2_000_000 * 15.259e-6, rel=1e-6)
    assert ident["gpu"] == "AMD Instinct MI300X" and ident["gpu_arch"] == "gfx942"
    assert ident["gpu_uuid"].startswith("GPU-fa4e0000") and ident["gpu_serial"].endswith("E0000")
    assert ident["driver"] == "6.12.12-fake" and ident["rocm"] == "7.0.2"
    assert ident["power_cap_w"] == 750 and ident["perf_level"] == "AUTO"
    assert ident["sm_clock_max_mhz"] == 2100
    assert (ident["now_temp_edge_c"], ident["now_temp_hotspot_c"], ident["now_temp_mem_c"]) == (
        41, 77, 63)
    assert ident["throttle_bits_field"] == "indep_throttle_status"


def test_asic_specific_throttle_status_when_indep_bits_are_not_filled(amd: FakeState) -> None:
    amd.set(indep_throttle=0xFFFF_FFFF_FFFF_FFFF, throttle_status=0x8000_0005)
    source = AmdSmiSource(0)
    try:
        assert source.read().throttle_bits == 0x8000_0005
        assert source.throttle_field == "throttle_status"
        amd.set(throttle_status=0xFFFF_FFFF)
        assert source.read().throttle_bits is None  # all-ones: not available
    finally:
        source.close()


def test_not_supported_answers_become_none(amd: FakeState) -> None:
    amd.set(ns_clock=1, sclk_mhz=1777)
    source = AmdSmiSource(0)
    try:
        assert source.read().sm_clock_mhz == 1777  # clock_info refused: per-XCC gpu_metrics
        amd.set(ns_metrics=1, ns_temp=1, ns_energy=1, ns_power=1, ns_power_cap=1, ns_perf_level=1)
        reading = source.read()
        ident = source.identity()
    finally:
        source.close()
    assert (reading.sm_clock_mhz, reading.mem_clock_mhz, reading.temperature_c) == (None,) * 3
    assert (reading.power_w, reading.throttle_bits, reading.energy_j) == (None,) * 3
    assert ident["power_cap_w"] is None and ident["perf_level"] is None
    for field in ("clock_gfx", "gpu_metrics", "temp_edge", "energy", "power"):
        assert field in ident["unsupported"]


def test_other_errors_give_none_and_are_reported(amd: FakeState) -> None:
    source = AmdSmiSource(0)
    try:
        amd.set(status=34)  # AMDSMI_STATUS_DRIVER_NOT_LOADED on every call
        reading = source.read()
        assert reading.sm_clock_mhz is None and reading.temperature_c is None
        amd.set(status=0)
        assert source.read().sm_clock_mhz == 2100  # transient: the field comes back
    finally:
        source.close()


def test_sampler_and_summarize_see_a_clock_drop(amd: FakeState) -> None:
    amd.set(sclk_mhz=2100)
    source = AmdSmiSource(0)
    with Sampler(source, period_s=0.01) as sampler:
        before = _sample(source, 0.15)
        amd.set(sclk_mhz=1400, indep_throttle=SPL)
        time.sleep(0.03)
        after = _sample(source, 0.15)
    source.close()
    assert sampler.errors == 0
    high = summarize(sampler.readings, *before, lag_s=0.0)
    low = summarize(sampler.readings, *after, lag_s=0.0)
    assert high.n_readings >= 5 and low.n_readings >= 5
    assert high.sm_clock_mhz_median == 2100 and high.throttle_bits_or == 0
    assert low.sm_clock_mhz_median == 1400 and low.sm_clock_mhz_min == 1400
    assert low.throttle_bits_or == SPL
    whole = summarize(sampler.readings, before[0], after[1], lag_s=0.0)
    assert whole.sm_clock_mhz_min == 1400 and whole.sm_clock_mhz_median in (1400, 2100, 1750)


def test_thermal_and_power_bits_are_ored_raw(amd: FakeState) -> None:
    source = AmdSmiSource(0)
    with Sampler(source, period_s=0.01) as sampler:
        t0 = time.perf_counter()
        amd.set(indep_throttle=PPT0)
        time.sleep(0.06)
        amd.set(indep_throttle=TEMP_HOTSPOT | TEMP_MEM)
        time.sleep(0.06)
        t1 = time.perf_counter()
    source.close()
    assert summarize(sampler.readings, t0, t1, 0.0).throttle_bits_or == (
        PPT0 | TEMP_HOTSPOT | TEMP_MEM)


def test_visible_devices_select_the_physical_gpu(amd: FakeState,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    amd.set(ngpu=4, sclk_mhz=2100, sclk_mhz__2=1650, sclk_mhz__3=1200)
    assert visible_physical_index(0, 4, {"ROCR_VISIBLE_DEVICES": "1,2,3",
                                         "HIP_VISIBLE_DEVICES": "1"}) == (2, "")
    assert visible_physical_index(0, 4, {"CUDA_VISIBLE_DEVICES": "3"}) == (3, "")
    index, note = visible_physical_index(0, 4, {"HIP_VISIBLE_DEVICES": "GPU-abc"})
    assert index == 0 and "not a list of indices" in note
    with pytest.raises(AmdSmiUnavailable, match="device 2 is not visible"):
        visible_physical_index(2, 4, {"HIP_VISIBLE_DEVICES": "0,1"})
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "3,2")
    source = AmdSmiSource(1)
    try:
        assert source.physical_index == 2 and source.read().sm_clock_mhz == 1650
    finally:
        source.close()


def test_pyrsmi_zero_gpu_defect_is_detected(amd: FakeState,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """pyrsmi's ctypes path (taken when its amdsmi-package attempt fails) truncates the
    fake's 64-bit handles and finds no GPU: the source must notice and use amdsmi."""
    from pyrsmi import rocml

    monkeypatch.setattr(rocml, "_init_processor_handles_via_amdsmi_package", lambda: False)
    monkeypatch.setattr(rocml, "_driver_initialized", lambda: True)  # no /sys/module/amdgpu here
    monkeypatch.setattr(rocml, "rocm_lib", None)
    monkeypatch.setattr(rocml, "_rocml_get_function_ptr_cache", {})
    amd.set(power_w=480)
    source = AmdSmiSource(0)
    try:
        assert "pyrsmi 1.1.0 sees 0 GPU(s) where amdsmi sees 1" in source.reason
        assert source.read().power_w == 480  # from amdsmi instead
        ident = source.identity()
        assert ident["gpu"] == "AMD Instinct MI300X" and ident["pyrsmi_version"] is None
    finally:
        source.close()


def test_forced_backend_and_environment_override(amd: FakeState,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPERF_TELEMETRY", "amdsmi")
    source = open_source()
    assert source.backend == "amdsmi" and "after" not in source.reason  # nvml not tried
    source.close()
    monkeypatch.setenv("KPERF_TELEMETRY", "none")
    assert open_source().backend == "none"


MISSING_LIBRARY_SCRIPT = r"""
import ctypes, json, os, sys
real_cdll_init = ctypes.CDLL.__init__
def refuse(self, name, *args, **kwargs):  # as if libamd_smi.so were installed nowhere
    if "libamd_smi" in str(name):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")
    real_cdll_init(self, name, *args, **kwargs)
ctypes.CDLL.__init__ = refuse
sys.path.insert(0, os.environ["REPO"])
from kperf.core.telemetry import open_source
from kperf.core.telemetry.amd import AmdSmiSource, AmdSmiUnavailable
out = {}
try:
    AmdSmiSource(0)
except AmdSmiUnavailable as err:
    out["direct"] = str(err)
auto = open_source("auto")
out["auto"] = [auto.backend, auto.reason]
os.environ["KPERF_SYSFS_ROOT"] = "/nonexistent-sysfs"
none = open_source("auto")
out["none"] = [none.backend, none.reason]
print(json.dumps(out))
"""


def test_missing_library_falls_back_quietly(tmp_path: Path) -> None:
    sysfs = make_sysfs(tmp_path / "sys")
    env = {k: v for k, v in os.environ.items() if k not in ("ROCM_HOME", "FAKE_AMDSMI_STATE")}
    env.update(ROCM_PATH=str(tmp_path / "no-rocm"), KPERF_SYSFS_ROOT=str(sysfs), REPO=str(REPO))
    env.pop("KPERF_TELEMETRY", None)
    run = subprocess.run([sys.executable, "-c", MISSING_LIBRARY_SCRIPT], capture_output=True,
                         text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 1, f"something printed to stdout: {run.stdout!r}"
    out = json.loads(lines[0])
    assert "KeyError" in out["direct"] and "Unable to find libamd_smi.so" in out["direct"]
    backend, reason = out["auto"]
    assert backend == "sysfs" and "amdsmi: AmdSmiUnavailable" in reason and "KeyError" in reason
    backend, reason = out["none"]
    assert backend == "none" and "KeyError" in reason and "sysfs: SysfsUnavailable" in reason


# ----------------------------------------------------------------- sysfs
def gpu_metrics_v1_3(throttle: int, indep: int) -> bytes:
    blob = bytearray(b"\xff" * 120)
    struct.pack_into("<HBB", blob, 0, 120, 1, 3)
    struct.pack_into("<I", blob, 68, throttle)  # offsets from kgd_pp_interface.h
    struct.pack_into("<Q", blob, 112, indep)
    return bytes(blob)


def dpm(levels: list[int], current: int) -> str:
    return "".join(f"{i}: {mhz}Mhz{' *' if i == current else ''}\n" for i, mhz in enumerate(levels))


def make_sysfs(root: Path, sclk_level: int = 2, indep: int = 0) -> Path:
    drm = root / "class" / "drm"
    bmc = drm / "card0" / "device"  # a server's display controller: not ours
    bmc.mkdir(parents=True)
    (bmc / "vendor").write_text("0x1a03\n")
    (drm / "card0-VGA-1").mkdir()
    dev = drm / "card1" / "device"
    hwmon = dev / "hwmon" / "hwmon3"
    hwmon.mkdir(parents=True)
    (dev / "vendor").write_text("0x1002\n")
    (dev / "device").write_text("0x74a1\n")
    (dev / "unique_id").write_text("5e1f00c0ffee\n")
    (dev / "product_name").write_text("AMD Instinct MI300X OAM\n")
    (dev / "power_dpm_force_performance_level").write_text("auto\n")
    (dev / "pp_dpm_sclk").write_text(dpm([500, 1300, 2100], sclk_level))
    (dev / "pp_dpm_mclk").write_text(dpm([900, 1300], 1))
    (dev / "gpu_metrics").write_bytes(gpu_metrics_v1_3(0xFFFF_FFFF, indep))
    for i, (label, milli) in enumerate([("edge", 45000), ("junction", 71000), ("mem", 66000)], 1):
        (hwmon / f"temp{i}_input").write_text(f"{milli}\n")
        (hwmon / f"temp{i}_label").write_text(f"{label}\n")
    (hwmon / "power1_average").write_text("598000000\n")
    (hwmon / "power1_cap").write_text("750000000\n")
    (root / "module" / "amdgpu").mkdir(parents=True)
    (root / "module" / "amdgpu" / "version").write_text("6.12.12\n")
    return root


def test_sysfs_source_reads_the_fake_tree(tmp_path: Path) -> None:
    root = make_sysfs(tmp_path, indep=TEMP_HOTSPOT)
    source = SysfsSource(0, root=root)
    reading = source.read()
    assert reading.sm_clock_mhz == 2100 and reading.mem_clock_mhz == 1300
    assert reading.temperature_c == 71 and reading.power_w == 598
    assert reading.throttle_bits == TEMP_HOTSPOT and reading.energy_j is None
    ident = source.identity()
    assert ident["gpu"] == "AMD Instinct MI300X OAM" and ident["gpu_serial"] == "5e1f00c0ffee"
    assert ident["driver"] == "6.12.12" and ident["power_cap_w"] == 750
    assert ident["sm_clock_max_mhz"] == 2100 and ident["now_temp_junction_c"] == 71
    assert ident["throttle_bits_field"] == "indep_throttle_status"


def test_sysfs_sampler_sees_a_clock_drop(tmp_path: Path) -> None:
    root = make_sysfs(tmp_path)
    sclk = root / "class" / "drm" / "card1" / "device" / "pp_dpm_sclk"
    source = SysfsSource(0, root=root)
    with Sampler(source, period_s=0.01) as sampler:
        before = _sample(source, 0.1)
        sclk.write_text(dpm([500, 1300, 2100], 1))
        time.sleep(0.03)
        after = _sample(source, 0.1)
    assert summarize(sampler.readings, *before, 0.0).sm_clock_mhz_median == 2100
    assert summarize(sampler.readings, *after, 0.0).sm_clock_mhz_median == 1300


def test_gpu_metrics_revisions() -> None:
    bits, field, _ = parse_throttle(gpu_metrics_v1_3(0x21, 0xFFFF_FFFF_FFFF_FFFF))
    assert (bits, field) == (0x21, "throttle_status")
    v1_6 = bytearray(b"\xff" * 300)
    struct.pack_into("<HBB", v1_6, 0, 300, 1, 6)
    struct.pack_into("<I", v1_6, 128, 0x4)
    assert parse_throttle(bytes(v1_6))[:2] == (0x4, "throttle_status")
    apu = struct.pack("<HBB", 64, 2, 1) + b"\0" * 60
    bits, field, note = parse_throttle(apu)
    assert bits is None and "v2.1: layout not known" in note
    short = gpu_metrics_v1_3(0, 0)[:100]
    bits, _, note = parse_throttle(short)
    assert bits is None and "need 120" in note


def test_sysfs_without_amd_cards_and_dpm_parsing(tmp_path: Path) -> None:
    with pytest.raises(SysfsUnavailable, match="no amdgpu card"):
        SysfsSource(0, root=tmp_path)
    assert current_level_mhz("0: 500Mhz\n1: 1900Mhz *\n2: 2100Mhz\n") == 1900
    assert current_level_mhz("S: 19Mhz\n0: 600Mhz\n") is None
