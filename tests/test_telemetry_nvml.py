"""NvmlSource logic against a fake ``pynvml`` module (no NVIDIA driver needed)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from kperf.core.telemetry.nvml import NvmlSource


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


def fake_pynvml(energy_supported: bool = True) -> types.ModuleType:
    """Enough of pynvml for NvmlSource and the machine file; records every call."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError, mod.NVMLError_NotSupported = NVMLError, NVMLError_NotSupported
    mod.NVML_CLOCK_SM, mod.NVML_CLOCK_MEM, mod.NVML_TEMPERATURE_GPU = 1, 2, 0
    mod.calls = []
    mod.locked = {}  # handle index -> locked SM MHz

    def log(name: str, *args: Any) -> None:
        mod.calls.append((name, *args))

    def handle(index: int) -> int:
        log("handle", index)
        return index

    def clock(h: int, kind: int) -> int:
        return mod.locked.get(h, 1755) if kind == mod.NVML_CLOCK_SM else 3201

    def energy(h: int) -> int:
        log("energy", h)
        if not energy_supported:
            raise NVMLError_NotSupported("Not Supported")
        return 123_456_789  # mJ

    def max_clock(h: int, kind: int) -> int:
        if kind == mod.NVML_CLOCK_MEM:
            raise NVMLError_NotSupported("Not Supported")
        return 1980

    def lock(h: int, lo: int, hi: int) -> None:
        log("lock", h, lo, hi)
        mod.locked[h] = hi

    def reset(h: int) -> None:
        log("reset", h)
        mod.locked.pop(h, None)

    mod.nvmlInit = lambda: log("init")
    mod.nvmlShutdown = lambda: log("shutdown")
    mod.nvmlDeviceGetHandleByIndex = handle

    def by_uuid(uuid: bytes) -> int:
        log("uuid", uuid)
        return 7

    mod.nvmlDeviceGetHandleByUUID = by_uuid
    mod.nvmlDeviceGetIndex = lambda h: h  # the fake's handles are the indices
    mod.nvmlDeviceGetClockInfo = clock
    mod.nvmlDeviceGetMaxClockInfo = max_clock
    mod.nvmlDeviceGetTemperature = lambda h, kind: 57
    mod.nvmlDeviceGetPowerUsage = lambda h: 690_500  # mW
    mod.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4  # SwPowerCap
    mod.nvmlDeviceGetTotalEnergyConsumption = energy
    mod.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    mod.nvmlDeviceGetUUID = lambda h: f"GPU-{h:08d}-fake"
    mod.nvmlSystemGetDriverVersion = lambda: "580.159.04"
    mod.nvmlSystemGetCudaDriverVersion_v2 = lambda: 13000
    mod.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    mod.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000
    mod.nvmlDeviceGetPersistenceMode = lambda h: 1
    mod.nvmlDeviceGetApplicationsClock = lambda h, kind: 1980 if kind == 1 else 3201
    mod.nvmlDeviceGetDefaultApplicationsClock = lambda h, kind: 1980 if kind == 1 else 3201
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)
    mod.nvmlDeviceGetSerial = lambda h: "165432101234"
    mod.nvmlDeviceSetGpuLockedClocks = lock
    mod.nvmlDeviceResetGpuLockedClocks = reset
    return mod


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return mod


def test_reading_units(nvml: types.ModuleType) -> None:
    source = NvmlSource(0)
    reading = source.read()
    assert (reading.sm_clock_mhz, reading.mem_clock_mhz) == (1755, 3201)
    assert reading.temperature_c == 57 and reading.power_w == pytest.approx(690.5)
    assert reading.throttle_bits == 0x4 and reading.energy_j == pytest.approx(123_456.789)
    source.close()
    assert ("shutdown",) in nvml.calls


def test_cuda_visible_devices_maps_to_the_nvml_index(nvml: types.ModuleType,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 5")
    NvmlSource(1)
    assert ("handle", 5) in nvml.calls
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    NvmlSource(1)
    assert ("handle", 1) in nvml.calls
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-30d957fc-b609,GPU-aaaa")
    NvmlSource(0)
    assert ("uuid", b"GPU-30d957fc-b609") in nvml.calls
    with pytest.raises(IndexError, match="CUDA_VISIBLE_DEVICES"):
        NvmlSource(2)


def test_energy_unsupported_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_pynvml(energy_supported=False)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    source = NvmlSource(0)
    first, second = source.read(), source.read()
    assert first.energy_j is None and second.energy_j is None
    assert second.sm_clock_mhz == 1755  # the rest of the reading is intact
    assert [c for c in mod.calls if c[0] == "energy"] == [("energy", 0)]


def test_identity(nvml: types.ModuleType) -> None:
    ident = NvmlSource(0).identity()
    assert ident["gpu"] == "NVIDIA H200" and ident["gpu_uuid"] == "GPU-00000000-fake"
    assert ident["driver"] == "580.159.04" and ident["sm_clock_max_mhz"] == 1980
    assert ident["power_limit_w"] == 700 and ident["persistence_mode"] == 1
