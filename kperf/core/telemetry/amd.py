"""AMD telemetry: amdsmi for clocks, temperatures and throttle bits; pyrsmi where it works.

pyrsmi 1.1.0, the binding the project is specified on, offers device identity,
utilization, memory and power, but no clock, temperature or throttle call at all. Those
come from the ``amdsmi`` package: ``amdsmi_get_clock_info`` (GFX, MEM),
``amdsmi_get_temp_metric`` (edge, hotspot, memory) and the raw ``throttle_status`` /
``indep_throttle_status`` of ``amdsmi_get_gpu_metrics_info`` (its Python layer reduces
both to booleans, so the struct is read directly to keep the bits).

Known defects handled here:
- ``import amdsmi`` without ``libamd_smi.so`` prints to stdout and raises ``KeyError``;
  the import is silenced and turned into ``AmdSmiUnavailable``.
- pyrsmi 1.1.0 passes 64-bit handles as C ints on its ctypes path and then reports zero
  GPUs; a GPU count that differs from amdsmi's disables pyrsmi, with the reason kept.
- A field the device does not support (NOT_SUPPORTED) reads ``None`` from then on.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from kperf.core.telemetry.base import Reading
from kperf.core.telemetry.processes import Listed, ProcessesUnavailable

# Not measured on hardware. The driver refreshes gpu_metrics at most every ~1 ms and
# amdsmi reads it on demand, so the readings should trail the work by little more than
# the sampler period; the value must be measured on an MI300X (step test) and replaced.
AMD_LAG_S = 0.01

NOT_SUPPORTED_CODES = frozenset({2, 3})  # AMDSMI_STATUS_NOT_SUPPORTED, NOT_YET_IMPLEMENTED
U16_NA, U32_NA, U64_NA = 0xFFFF, 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF
PERF_PREFIX = "AMDSMI_DEV_PERF_LEVEL_"


class AmdSmiUnavailable(RuntimeError):
    """amdsmi cannot serve this process: no library, no driver, no GPU."""


def import_amdsmi() -> ModuleType:
    """Import the amdsmi package without letting it print to stdout or raise KeyError."""
    if "amdsmi" in sys.modules and hasattr(sys.modules["amdsmi"], "amdsmi_init"):
        return sys.modules["amdsmi"]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            import amdsmi
            import amdsmi.amdsmi_wrapper
    except Exception as err:  # KeyError when libamd_smi.so is missing, not ImportError
        said = " ".join(printed.getvalue().split())
        detail = f"; it printed: {said}" if said else ""
        raise AmdSmiUnavailable(
            f"amdsmi package unusable ({type(err).__name__}: {err}){detail}") from None
    return amdsmi


def _describe(err: BaseException) -> str:
    code = getattr(err, "get_error_code", None)
    suffix = f" (status {code()})" if callable(code) else ""
    return f"{type(err).__name__}: {err}{suffix}"


def visible_physical_index(device_index: int, count: int,
                           environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Map a HIP/torch device index to the index among all GPUs amdsmi lists.

    ROCR_VISIBLE_DEVICES selects first, then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES,
    which HIP also honours) indexes into what is left. Entries that are not plain indices
    (UUIDs) cannot be mapped here; the index is then assumed to be physical and the note
    says so.
    """
    env = os.environ if environ is None else environ
    ids = list(range(count))
    hip_var = "HIP_VISIBLE_DEVICES" if env.get("HIP_VISIBLE_DEVICES") else "CUDA_VISIBLE_DEVICES"
    for var in ("ROCR_VISIBLE_DEVICES", hip_var):
        entries = [e.strip() for e in env.get(var, "").split(",") if e.strip()]
        if not entries:
            continue
        if not all(e.isdigit() for e in entries):
            note = f"{var}={env[var]!r} is not a list of indices; index assumed physical"
            return device_index, note
        ids = [ids[int(e)] for e in entries if int(e) < len(ids)]
    if not 0 <= device_index < len(ids):
        raise AmdSmiUnavailable(
            f"device {device_index} is not visible: {len(ids)} of {count} GPUs remain after "
            "ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES")
    return ids[device_index], ""


def _number(value: Any, na: int | None = None) -> float | None:
    """A reading as float; amdsmi's "N/A" strings and all-ones sentinels become None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if na is not None and value == na:
        return None
    return float(value)


class AmdSmiSource:
    backend = "amdsmi"
    lag_s = AMD_LAG_S

    def __init__(self, device_index: int = 0, use_pyrsmi: bool = True) -> None:
        self._smi = import_amdsmi()
        self._wrapper = self._smi.amdsmi_wrapper
        self._skip: dict[str, str] = {}  # field -> why it reads None from now on
        self._errors: dict[str, str] = {}  # field -> last transient error
        self._amdsmi_open = False
        self._pyrsmi: ModuleType | None = None
        self.throttle_field: str | None = None
        self.temperatures: dict[str, float | None] = {}
        try:
            self._smi.amdsmi_init()
        except Exception as err:
            raise AmdSmiUnavailable(f"amdsmi_init failed: {_describe(err)}") from None
        self._amdsmi_open = True
        try:
            handles = self._smi.amdsmi_get_processor_handles()
            if not handles:
                raise AmdSmiUnavailable("amdsmi lists no AMD GPU")
            self.physical_index, map_note = visible_physical_index(device_index, len(handles))
        except Exception:
            self.close()
            raise
        self.device_index = device_index
        self._handle = handles[self.physical_index]
        pyrsmi_note = "pyrsmi not used"
        if use_pyrsmi:
            self._pyrsmi, pyrsmi_note = self._open_pyrsmi(len(handles))
            self._reopen_if_shut()
        notes = [f"amdsmi {self._package_version()}", pyrsmi_note, map_note]
        self.reason = "; ".join(n for n in notes if n)

    @property
    def reason(self) -> str:
        """Why this backend, and (once read) which gpu_metrics field the throttle bits are."""
        field = f"; throttle bits: {self.throttle_field}" if self.throttle_field else ""
        return self._reason + field

    @reason.setter
    def reason(self, text: str) -> None:
        self._reason = text

    # -------------------------------------------------------------- set-up
    def _package_version(self) -> str:
        return str(getattr(self._smi, "__version__", "") or _dist_version("amdsmi"))

    def _open_pyrsmi(self, amdsmi_count: int) -> tuple[ModuleType | None, str]:
        try:
            from pyrsmi import rocml
        except Exception as err:
            return None, f"pyrsmi unavailable ({_describe(err)})"
        version = _dist_version("pyrsmi")
        fallback = "identity, power and utilization from amdsmi"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                rocml.smi_initialize()
        except Exception as err:
            return None, f"pyrsmi {version} smi_initialize failed ({_describe(err)}); {fallback}"
        count = rocml.smi_get_device_count()
        if count != amdsmi_count:
            with contextlib.suppress(Exception):
                rocml.smi_shutdown()
            return None, (f"pyrsmi {version} sees {count} GPU(s) where amdsmi sees {amdsmi_count} "
                          "(pyrsmi 1.1.0's ctypes path truncates 64-bit device handles); "
                          f"{fallback}")
        path = "amdsmi package" if getattr(rocml, "_using_amdsmi_package", False) else "ctypes"
        return rocml, f"pyrsmi {version} ({path}) for identity, power and utilization"

    def _reopen_if_shut(self) -> None:
        """pyrsmi shuts amdsmi down when its own attempt finds no GPU: open it again."""
        try:
            self._smi.amdsmi_get_processor_handles()
        except Exception:
            self._smi.amdsmi_init()
            self._handle = self._smi.amdsmi_get_processor_handles()[self.physical_index]

    # -------------------------------------------------------------- calls
    def _call(self, field: str, fn: Callable[..., Any], *args: Any) -> Any:
        """One amdsmi call; NOT_SUPPORTED retires the field, other errors give None once."""
        if field in self._skip:
            return None
        try:
            return fn(*args)
        except Exception as err:
            code = getattr(err, "get_error_code", None)
            if callable(code) and code() in NOT_SUPPORTED_CODES:
                self._skip[field] = "NOT_SUPPORTED"
            else:
                self._errors[field] = _describe(err)
            return None

    def _raw_metrics(self) -> Any:
        """The gpu_metrics struct itself: its Python layer turns throttle bits into bools."""
        if "gpu_metrics" in self._skip:
            return None
        metrics = self._wrapper.amdsmi_gpu_metrics_t()
        status = self._wrapper.amdsmi_get_gpu_metrics_info(self._handle, ctypes.byref(metrics))
        if status in NOT_SUPPORTED_CODES:
            self._skip["gpu_metrics"] = "NOT_SUPPORTED"
        elif status != 0:
            self._errors["gpu_metrics"] = f"status {status}"
        return metrics if status == 0 else None

    def _clock(self, kind: str, metrics: Any) -> float | None:
        clk_type = getattr(self._smi.AmdSmiClkType, kind)
        info = self._call(f"clock_{kind.lower()}", self._smi.amdsmi_get_clock_info,
                          self._handle, clk_type)
        value = _number(info.get("clk"), U32_NA) if info else None
        if value is not None or metrics is None:
            return value
        if kind == "MEM":
            return _number(metrics.current_uclk, U16_NA)
        per_xcc = [float(c) for c in metrics.current_gfxclks if c != U16_NA]  # MI300: one per XCC
        return statistics.median(per_xcc) if per_xcc else _number(metrics.current_gfxclk, U16_NA)

    def _temperatures(self, metrics: Any) -> dict[str, float | None]:
        kinds = self._smi.AmdSmiTemperatureType
        current = self._smi.AmdSmiTemperatureMetric.CURRENT
        out: dict[str, float | None] = {}
        for name, sensor, raw_field in (("edge", kinds.EDGE, "temperature_edge"),
                                        ("hotspot", kinds.HOTSPOT, "temperature_hotspot"),
                                        ("mem", kinds.VRAM, "temperature_mem")):
            value = _number(self._call(f"temp_{name}", self._smi.amdsmi_get_temp_metric,
                                       self._handle, sensor, current))
            if value is None and metrics is not None:
                value = _number(getattr(metrics, raw_field), U16_NA)
            out[name] = value
        return out

    def _power(self) -> float | None:
        if self._pyrsmi is not None and "power_pyrsmi" not in self._skip:
            watts = self._pyrsmi.smi_get_device_average_power(self.physical_index)
            if isinstance(watts, (int, float)) and watts > 0:
                return float(watts)
            self._skip["power_pyrsmi"] = "pyrsmi returned no power; amdsmi used"
        info = self._call("power", self._smi.amdsmi_get_power_info, self._handle)
        if not info:
            return None
        for key in ("current_socket_power", "average_socket_power", "socket_power"):
            value = _number(info.get(key), U16_NA)
            if value:
                return value
        return None

    def _energy(self) -> float | None:
        count = self._call("energy", self._smi.amdsmi_get_energy_count, self._handle)
        if not count:
            return None
        acc, resolution = count.get("energy_accumulator"), count.get("counter_resolution")
        if _number(acc, U64_NA) is None or _number(resolution) is None:
            return None
        return acc * resolution * 1e-6  # counts x uJ -> J

    def _power_limit(self) -> float | None:
        cap = self._call("power_cap", self._smi.amdsmi_get_power_cap_info, self._handle)
        watts = _number((cap or {}).get("power_cap"), U64_NA)
        return watts / 1e6 if watts else None  # uW -> W

    def _throttle_bits(self, metrics: Any) -> int | None:
        """indep_throttle_status (ASIC-independent SMU_THROTTLER_* bits) when the device fills
        it, else the ASIC-specific throttle_status; all-ones means not available."""
        if metrics is None:
            return None
        for field, na in (("indep_throttle_status", U64_NA), ("throttle_status", U32_NA)):
            value = int(getattr(metrics, field))
            if value != na:
                self.throttle_field = field
                return value
        return None

    # -------------------------------------------------------------- Source
    def read(self) -> Reading:
        t = time.perf_counter()
        metrics = self._raw_metrics()
        temps = self._temperatures(metrics)
        self.temperatures = temps
        known = [v for v in temps.values() if v is not None]
        return Reading(
            t=t,
            sm_clock_mhz=self._clock("GFX", metrics),
            mem_clock_mhz=self._clock("MEM", metrics),
            temperature_c=max(known) if known else None,
            power_w=self._power(),
            throttle_bits=self._throttle_bits(metrics),
            energy_j=self._energy(),
            power_limit_w=self._power_limit(),
        )

    def processes(self) -> list[Listed]:
        """``amdsmi_get_gpu_process_list``: pid, VRAM and GFX engine time (ns so far) of each
        process on this GPU; ``ProcessesUnavailable`` where amdsmi refuses it."""
        try:
            listed = self._smi.amdsmi_get_gpu_process_list(self._handle)
        except Exception as err:
            raise ProcessesUnavailable(
                f"amdsmi_get_gpu_process_list: {_describe(err)}") from None
        out = []
        for proc in listed:
            memory, engines = proc.get("memory_usage") or {}, proc.get("engine_usage") or {}
            vram = _number(memory.get("vram_mem"), U64_NA) or _number(proc.get("mem"), U64_NA)
            busy = _number(engines.get("gfx"), U64_NA)
            out.append(Listed(int(proc["pid"]), int(vram) if vram is not None else None, "gpu",
                              int(busy) if busy is not None else None))
        return out

    def identity(self) -> dict[str, Any]:
        """Stable facts about the GPU; keys starting with ``now_`` are a snapshot of its state."""
        smi, h = self._smi, self._handle
        asic = self._call("asic_info", smi.amdsmi_get_gpu_asic_info, h) or {}
        info: dict[str, Any] = {
            "telemetry": "amdsmi",
            "telemetry_reason": self.reason,
            "gpu": self._pyrsmi_text("smi_get_device_name") or _text(asic.get("market_name")),
            "gpu_arch": _text(asic.get("target_graphics_version")),
            "gpu_device_id": _text(asic.get("device_id")),
            "gpu_serial": _text(asic.get("asic_serial")),
            "gpu_compute_units": asic.get("num_compute_units"),
            "gpu_uuid": self._pyrsmi_text("smi_get_device_uuid")
            or _text(self._call("uuid", smi.amdsmi_get_gpu_device_uuid, h)),
            "gpu_index_physical": self.physical_index,
            "amdsmi_version": self._package_version(),
            "pyrsmi_version": _dist_version("pyrsmi") if self._pyrsmi else None,
        }
        info.update(self._software())
        info.update(self._limits())
        self.read()  # refresh the temperatures for the snapshot
        info.update({f"now_temp_{k}_c": v for k, v in self.temperatures.items()})
        info["now_gfx_activity_pct"] = self._activity()
        info["throttle_bits_field"] = self.throttle_field
        info["unsupported"] = ", ".join(sorted(self._skip)) or None
        errors = "; ".join(f"{k}: {v}" for k, v in sorted(self._errors.items()))
        info["read_errors"] = errors or None
        return info

    def _software(self) -> dict[str, Any]:
        smi, h = self._smi, self._handle
        driver = self._call("driver_info", smi.amdsmi_get_gpu_driver_info, h) or {}
        vbios = self._call("vbios_info", smi.amdsmi_get_gpu_vbios_info, h) or {}
        lib = self._call("lib_version", smi.amdsmi_get_lib_version) or {}
        rocm = self._call("rocm_version", smi.amdsmi_get_rocm_version) or (False, "")
        lib_text = ".".join(str(lib[k]) for k in ("major", "minor", "release") if k in lib)
        return {
            "driver": _text(driver.get("driver_version")),
            "vbios": _text(vbios.get("version")),
            "amdsmi_lib_version": lib_text or None,
            "rocm": rocm[1] if rocm[0] else None,
        }

    def _limits(self) -> dict[str, Any]:
        smi, h = self._smi, self._handle
        cap = self._call("power_cap", smi.amdsmi_get_power_cap_info, h) or {}
        power = self._call("power", smi.amdsmi_get_power_info, h) or {}
        gfx = self._call("clock_gfx", smi.amdsmi_get_clock_info, h, smi.AmdSmiClkType.GFX) or {}
        mem = self._call("clock_mem", smi.amdsmi_get_clock_info, h, smi.AmdSmiClkType.MEM) or {}
        level = _text(self._call("perf_level", smi.amdsmi_get_gpu_perf_level, h))

        def watts(uw: Any) -> float | None:
            value = _number(uw, U64_NA)
            return value / 1e6 if value is not None else None

        return {
            "power_limit_w": _number(power.get("power_limit"), U16_NA),
            "power_cap_w": watts(cap.get("power_cap")),
            "power_cap_default_w": watts(cap.get("default_power_cap")),
            "perf_level": level.removeprefix(PERF_PREFIX) if level else None,
            "sm_clock_locked": gfx.get("clk_locked") if isinstance(gfx.get("clk_locked"), bool)
            else None,
            "sm_clock_min_mhz": _number(gfx.get("min_clk"), U32_NA),
            "sm_clock_max_mhz": _number(gfx.get("max_clk"), U32_NA),
            "mem_clock_max_mhz": _number(mem.get("max_clk"), U32_NA),
        }

    def _activity(self) -> float | None:
        if self._pyrsmi is not None:
            busy = self._pyrsmi.smi_get_device_utilization(self.physical_index)
            if isinstance(busy, (int, float)) and busy >= 0:
                return float(busy)
        usage = self._call("activity", self._smi.amdsmi_get_gpu_activity, self._handle) or {}
        return _number(usage.get("gfx_activity"))

    def _pyrsmi_text(self, name: str) -> str | None:
        if self._pyrsmi is None:
            return None
        try:
            value = getattr(self._pyrsmi, name)(self.physical_index)
        except Exception:
            return None
        return _text(value)

    def close(self) -> None:
        if self._pyrsmi is not None:
            with contextlib.suppress(Exception):
                self._pyrsmi.smi_shutdown()
            self._pyrsmi = None
        if self._amdsmi_open:
            with contextlib.suppress(Exception):
                self._smi.amdsmi_shut_down()
            self._amdsmi_open = False


def _text(value: Any) -> str | None:
    """A non-empty string, or None for amdsmi's "N/A", pyrsmi's "" / -1 and missing values."""
    if value is None or isinstance(value, bool):
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    return None if text in ("", "N/A", "-1") else text


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"
