"""AMD telemetry from the amdgpu driver's sysfs files, for machines without amdsmi.

Per GPU (``<root>/class/drm/cardN/device``):
- ``pp_dpm_sclk`` / ``pp_dpm_mclk``: DPM levels, the current one marked ``*`` (MHz);
- ``hwmon/hwmon*/temp*_input`` (m°C, labelled edge / junction / mem) and
  ``power1_average`` or ``power1_input`` (µW);
- ``gpu_metrics``: a binary table. Its throttle fields are read only for the layouts
  known here (format 1, content 1-6, checked against the header's size); for any other
  revision ``throttle_bits`` stays None and ``throttle_note`` says why.

There is no energy counter here (hwmon has none; gpu_metrics' accumulator units vary by
ASIC), so ``energy_j`` is None. ``root`` (or ``KPERF_SYSFS_ROOT``) points tests at a fake tree.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import time
from pathlib import Path
from typing import Any

from kperf.core.telemetry.amd import AMD_LAG_S, visible_physical_index
from kperf.core.telemetry.base import Reading
from kperf.core.telemetry.processes import ProcessesUnavailable

AMD_VENDOR = "0x1002"
_LEVEL = re.compile(r"^\s*\S+:\s*(\d+)\s*mhz\b(.*)$", re.I)
U32_NA, U64_NA = 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF


class SysfsUnavailable(RuntimeError):
    pass


# ------------------------------------------------------------- gpu_metrics layouts
# Prefixes of the kernel's struct gpu_metrics_v1_N (drivers/gpu/drm/amd/include/
# kgd_pp_interface.h), up to the throttle fields; natural alignment, as in the kernel.
class _Header(ctypes.LittleEndianStructure):
    _fields_ = [("structure_size", ctypes.c_uint16), ("format_revision", ctypes.c_uint8),
                ("content_revision", ctypes.c_uint8)]


_V1_1_TO_3 = [
    ("header", _Header),
    ("temperature", ctypes.c_uint16 * 6),  # edge, hotspot, mem, vrgfx, vrsoc, vrmem
    ("activity", ctypes.c_uint16 * 3),
    ("average_socket_power", ctypes.c_uint16),
    ("energy_accumulator", ctypes.c_uint64),
    ("system_clock_counter", ctypes.c_uint64),
    ("average_clocks", ctypes.c_uint16 * 7),
    ("current_clocks", ctypes.c_uint16 * 7),  # gfxclk, socclk, uclk, vclk0, dclk0, vclk1, dclk1
    ("throttle_status", ctypes.c_uint32),
]


class _V1_1(ctypes.LittleEndianStructure):
    _fields_ = _V1_1_TO_3


class _V1_3(ctypes.LittleEndianStructure):
    _fields_ = [
        *_V1_1_TO_3,
        ("current_fan_speed", ctypes.c_uint16),
        ("pcie_link", ctypes.c_uint16 * 2),
        ("padding", ctypes.c_uint16),
        ("activity_acc", ctypes.c_uint32 * 2),
        ("temperature_hbm", ctypes.c_uint16 * 4),
        ("firmware_timestamp", ctypes.c_uint64),
        ("voltage", ctypes.c_uint16 * 3),
        ("padding1", ctypes.c_uint16),
        ("indep_throttle_status", ctypes.c_uint64),
    ]


_V1_4_HEAD = [
    ("header", _Header),
    ("temperature", ctypes.c_uint16 * 3),  # hotspot, mem, vrsoc
    ("curr_socket_power", ctypes.c_uint16),
    ("activity", ctypes.c_uint16 * 2),
    ("vcn_activity", ctypes.c_uint16 * 4),
]
_V1_4_TAIL = [("energy_accumulator", ctypes.c_uint64), ("system_clock_counter", ctypes.c_uint64)]
_JPEG = ("jpeg_activity", ctypes.c_uint16 * 32)
_THROTTLE = ("throttle_status", ctypes.c_uint32)


class _V1_4(ctypes.LittleEndianStructure):  # MI300 (smu 13.0.6)
    _fields_ = [*_V1_4_HEAD, *_V1_4_TAIL, _THROTTLE]


class _V1_5(ctypes.LittleEndianStructure):
    _fields_ = [*_V1_4_HEAD, _JPEG, *_V1_4_TAIL, _THROTTLE]


class _V1_6(ctypes.LittleEndianStructure):
    _fields_ = [
        *_V1_4_HEAD, _JPEG, *_V1_4_TAIL,
        ("accumulation_counter", ctypes.c_uint32),
        ("residency_acc", ctypes.c_uint32 * 5),  # prochot, ppt, socket_thm, vr_thm, hbm_thm
        _THROTTLE,
    ]


GPU_METRICS_LAYOUTS: dict[tuple[int, int], type[ctypes.Structure]] = {
    (1, 1): _V1_1, (1, 2): _V1_1, (1, 3): _V1_3, (1, 4): _V1_4, (1, 5): _V1_5, (1, 6): _V1_6,
}


def parse_throttle(blob: bytes) -> tuple[int | None, str | None, str]:
    """(bits, field, note) from a gpu_metrics table; bits None when the layout is unknown."""
    if len(blob) < ctypes.sizeof(_Header):
        return None, None, f"gpu_metrics too short ({len(blob)} bytes)"
    header = _Header.from_buffer_copy(blob)
    revision = (header.format_revision, header.content_revision)
    layout = GPU_METRICS_LAYOUTS.get(revision)
    if layout is None:
        return None, None, f"gpu_metrics v{revision[0]}.{revision[1]}: layout not known here"
    need = ctypes.sizeof(layout)
    if header.structure_size < need or len(blob) < need:
        return None, None, (f"gpu_metrics v{revision[0]}.{revision[1]}: {len(blob)} bytes "
                            f"(header says {header.structure_size}), need {need}")
    table = layout.from_buffer_copy(blob)
    fields = [("indep_throttle_status", U64_NA)] if hasattr(table, "indep_throttle_status") else []
    for field, na in [*fields, ("throttle_status", U32_NA)]:
        value = int(getattr(table, field))
        if value != na:
            return value, field, f"gpu_metrics v{revision[0]}.{revision[1]} {field}"
    return None, None, f"gpu_metrics v{revision[0]}.{revision[1]}: throttle fields not filled"


# ------------------------------------------------------------- files
def current_level_mhz(text: str) -> float | None:
    """The level marked ``*`` in a pp_dpm_* listing such as ``1: 1900Mhz *``."""
    for line in text.splitlines():
        match = _LEVEL.match(line)
        if match and "*" in match.group(2):
            return float(match.group(1))
    return None


def max_level_mhz(text: str) -> float | None:
    levels = [float(m.group(1)) for line in text.splitlines() if (m := _LEVEL.match(line))]
    return max(levels) if levels else None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def amd_cards(root: Path) -> list[Path]:
    """``device`` dirs of amdgpu cards that report clocks, in card order (card0, card1, ...)."""
    found = []
    for card in glob.glob(str(root / "class" / "drm" / "card*")):
        name = os.path.basename(card)
        if not re.fullmatch(r"card\d+", name):
            continue  # connectors such as card0-DP-1
        device = Path(card) / "device"
        vendor = (_read_text(device / "vendor") or "").strip().lower()
        if vendor == AMD_VENDOR and (device / "pp_dpm_sclk").exists():
            found.append((int(name[4:]), device))
    return [device for _, device in sorted(found)]


class SysfsSource:
    backend = "sysfs"
    lag_s = AMD_LAG_S

    def __init__(self, device_index: int = 0, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root or os.environ.get("KPERF_SYSFS_ROOT", "/sys"))
        cards = amd_cards(self.root)
        if not cards:
            raise SysfsUnavailable(f"no amdgpu card with pp_dpm_sclk under {self.root}/class/drm")
        index, note = visible_physical_index(device_index, len(cards))
        self.device = cards[index]
        hwmons = sorted(glob.glob(str(self.device / "hwmon" / "hwmon*")))
        self.hwmon = Path(hwmons[0]) if hwmons else None
        self.throttle_field: str | None = None
        self.throttle_note = "gpu_metrics not read yet"
        self.temperatures: dict[str, float] = {}
        card = self.device.parent.name
        self.reason = "; ".join(n for n in (f"amdgpu sysfs {card}", note) if n)

    @property
    def reason(self) -> str:
        field = f"; throttle bits: {self.throttle_field}" if self.throttle_field else ""
        return self._reason + field

    @reason.setter
    def reason(self, text: str) -> None:
        self._reason = text

    def processes(self) -> list[Any]:
        """None to list: amdgpu's sysfs files have no per-process table (amdsmi has one)."""
        raise ProcessesUnavailable("the sysfs backend has no process list (amdgpu's sysfs "
                                   "files name no process; amdsmi's list does)")

    def _temperatures(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.hwmon is None:
            return out
        for path in sorted(self.hwmon.glob("temp*_input")):
            millideg = _read_int(path)
            if millideg is None:
                continue
            label_file = path.with_name(path.name.replace("_input", "_label"))
            label = (_read_text(label_file) or path.name.split("_")[0]).strip()
            out[label] = millideg / 1000.0
        return out

    def _power(self) -> float | None:
        if self.hwmon is None:
            return None
        for name in ("power1_average", "power1_input"):
            microwatts = _read_int(self.hwmon / name)
            if microwatts is not None:
                return microwatts / 1e6
        return None

    def _throttle(self) -> int | None:
        try:
            blob = (self.device / "gpu_metrics").read_bytes()
        except OSError as err:
            self.throttle_note = f"gpu_metrics unreadable ({err.strerror or err})"
            return None
        bits, field, self.throttle_note = parse_throttle(blob)
        self.throttle_field = field or self.throttle_field
        return bits

    def read(self) -> Reading:
        t = time.perf_counter()
        sclk = _read_text(self.device / "pp_dpm_sclk")
        mclk = _read_text(self.device / "pp_dpm_mclk")
        self.temperatures = self._temperatures()
        return Reading(
            t=t,
            sm_clock_mhz=current_level_mhz(sclk) if sclk else None,
            mem_clock_mhz=current_level_mhz(mclk) if mclk else None,
            temperature_c=max(self.temperatures.values()) if self.temperatures else None,
            power_w=self._power(),
            throttle_bits=self._throttle(),
            power_limit_w=self._power_limit(),
        )

    def _power_limit(self) -> float | None:
        cap_uw = _read_int(self.hwmon / "power1_cap") if self.hwmon else None
        return cap_uw / 1e6 if cap_uw else None

    def identity(self) -> dict[str, Any]:
        dev = self.device
        sclk = _read_text(dev / "pp_dpm_sclk") or ""
        mclk = _read_text(dev / "pp_dpm_mclk") or ""
        cap_uw = _read_int(self.hwmon / "power1_cap") if self.hwmon else None
        default_uw = _read_int(self.hwmon / "power1_cap_default") if self.hwmon else None
        self.read()
        info: dict[str, Any] = {
            "telemetry": "sysfs",
            "telemetry_reason": self.reason,
            "gpu": _strip(_read_text(dev / "product_name")),
            "gpu_device_id": _strip(_read_text(dev / "device")),
            "gpu_serial": _strip(_read_text(dev / "unique_id")),
            "gpu_pci": os.path.basename(os.path.realpath(dev)),
            "vbios": _strip(_read_text(dev / "vbios_version")),
            "driver": _strip(_read_text(self.root / "module" / "amdgpu" / "version")),
            "perf_level": _strip(_read_text(dev / "power_dpm_force_performance_level")),
            "power_cap_w": cap_uw / 1e6 if cap_uw is not None else None,
            "power_cap_default_w": default_uw / 1e6 if default_uw is not None else None,
            "sm_clock_max_mhz": max_level_mhz(sclk),
            "mem_clock_max_mhz": max_level_mhz(mclk),
            "throttle_bits_field": self.throttle_field,
            "throttle_note": self.throttle_note,
        }
        info.update({f"now_temp_{k}_c": v for k, v in self.temperatures.items()})
        return info

    def close(self) -> None:
        pass


def _strip(text: str | None) -> str | None:
    value = text.strip() if text else ""
    return value or None
