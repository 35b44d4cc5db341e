"""NVIDIA telemetry through NVML (nvidia-ml-py).

Each call costs about 1 us on an H200 (docs/facts.md).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from kperf.core.telemetry.base import Reading
from kperf.core.telemetry.processes import Listed, ProcessesUnavailable, merge

# NVML's process lists, by kind (kperf/core/telemetry/processes.py); graphics and MPS lists a
# device or a pynvml lacks are passed over, the compute list is required
PROCESS_LISTS = (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                 ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
                 ("mps", "nvmlDeviceGetMPSComputeRunningProcesses"))

# NVML refreshes clocks and power about every 100 ms and trails the work by ~50 ms
# (measured on an H200 on 2026-12-01, docs/facts.md); readings are shifted by this lag.
NVML_LAG_S = 0.05


def nvml_handle(nvml, device_index: int):
    """The NVML handle of torch's device ``device_index``.

    NVML sees every GPU; torch sees those CUDA_VISIBLE_DEVICES lists, by index, UUID or
    MIG UUID. An index beyond the list is an error naming the variable.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    if not entries:
        return nvml.nvmlDeviceGetHandleByIndex(device_index)
    if device_index >= len(entries):
        raise IndexError(f"device {device_index} is not in CUDA_VISIBLE_DEVICES={visible!r}")
    entry = entries[device_index]
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry.encode())


class NvmlSource:
    backend = "nvml"
    lag_s = NVML_LAG_S

    def __init__(self, device_index: int = 0) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = nvml_handle(pynvml, device_index)
        self.reason = "NVML"
        self._missing: set[str] = set()  # optional readings this device does not give

    def _optional(self, name: str, call: Callable[[], float]) -> float | None:
        """A reading some devices lack: asked until NVML first refuses it, then never."""
        if name in self._missing:
            return None
        try:
            return call()
        except self._nvml.NVMLError:
            self._missing.add(name)
            return None

    def read(self) -> Reading:
        n, h = self._nvml, self._handle
        energy = self._optional("energy", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h)
                                / 1000.0)  # mJ -> J
        limit = self._optional("limit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)
                               / 1000.0)  # mW -> W
        return Reading(
            t=time.perf_counter(),
            sm_clock_mhz=float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            mem_clock_mhz=float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            temperature_c=float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            throttle_bits=int(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
            energy_j=energy,
            power_limit_w=limit,
        )

    def device_node(self) -> str | None:
        """``/dev/nvidia<minor>``: the node a process with a context on this GPU holds
        open, which a container sees under the same minor number."""
        try:
            return f"/dev/nvidia{int(self._nvml.nvmlDeviceGetMinorNumber(self._handle))}"
        except self._nvml.NVMLError:
            return None

    def processes(self) -> list[Listed]:
        """The processes holding a context on this GPU (each list NVML has): pid and GPU
        memory. ``ProcessesUnavailable`` where NVML cannot list its compute processes."""
        n, h = self._nvml, self._handle
        out: list[Listed] = []
        for kind, name in PROCESS_LISTS:
            call = getattr(n, name, None)
            if f"processes_{kind}" in self._missing or call is None:
                if kind == "compute":
                    raise ProcessesUnavailable(f"NVML: {name} is not available here")
                continue
            try:
                infos = call(h)
            except n.NVMLError as err:
                if kind == "compute":
                    raise ProcessesUnavailable(f"NVML: {name}: {err}") from None
                self._missing.add(f"processes_{kind}")
                continue
            out += [Listed(int(i.pid), _bytes(getattr(i, "usedGpuMemory", None)), kind)
                    for i in infos]
        return merge(out)

    def identity(self) -> dict[str, Any]:
        n, h = self._nvml, self._handle

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        info: dict[str, Any] = {
            "telemetry": "nvml",
            "gpu": text(n.nvmlDeviceGetName(h)),
            "gpu_uuid": text(n.nvmlDeviceGetUUID(h)),
            "driver": text(n.nvmlSystemGetDriverVersion()),
        }
        for key, call in (
            ("sm_clock_max_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            ("power_limit_w", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
            ("persistence_mode", lambda: n.nvmlDeviceGetPersistenceMode(h)),
        ):
            try:
                info[key] = call()
            except n.NVMLError:
                info[key] = None
        return info

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()



def _bytes(value: Any) -> int | None:
    """NVML's used memory: bytes, or None (pynvml gives None where NVML has no figure)."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
