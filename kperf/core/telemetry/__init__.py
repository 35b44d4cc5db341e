"""GPU telemetry: what the GPU was doing while a sample ran.

A ``Source`` reads one instantaneous ``Reading`` (clocks, temperature, power, throttle
bits, cumulative energy). A ``Sampler`` polls a source on a background thread and
summarizes any host-time window, shifted by the source's reporting lag. Telemetry
failures never fail a benchmark: a broken source degrades to ``NullSource`` with the
reason recorded.
"""

from __future__ import annotations

import os

from kperf.core.telemetry.base import (
    NullSource,
    Reading,
    Sampler,
    Source,
    WindowStats,
    or_bits,
    summarize,
)

__all__ = ["NullSource", "Reading", "Sampler", "Source", "WindowStats", "open_source", "or_bits",
           "summarize"]


def open_source(kind: str | None = None, device_index: int = 0) -> Source:
    """Pick the telemetry backend: ``KPERF_TELEMETRY`` or ``kind`` forces one, else auto.

    Auto tries NVML, then amdsmi (AMD), then sysfs, and falls back to ``NullSource``.
    """
    kind = (kind or os.environ.get("KPERF_TELEMETRY", "auto")).lower()
    order = {"auto": ("nvml", "amdsmi", "sysfs"), "none": ()}.get(kind, (kind,))
    reasons = []
    for name in order:
        try:
            source = _open(name, device_index)
        except Exception as err:  # a missing driver or library is an answer, not an error
            reasons.append(f"{name}: {type(err).__name__}: {err}")
            continue
        if reasons:  # say why the backends tried before this one were passed over
            source.reason = f"{source.reason} (after {'; '.join(reasons)})"
        return source
    return NullSource("; ".join(reasons) or f"telemetry disabled ({kind})")


def _open(name: str, device_index: int) -> Source:
    if name == "nvml":
        from kperf.core.telemetry.nvml import NvmlSource

        return NvmlSource(device_index)
    if name == "amdsmi":
        from kperf.core.telemetry.amd import AmdSmiSource

        return AmdSmiSource(device_index)
    if name == "sysfs":
        from kperf.core.telemetry.sysfs import SysfsSource

        return SysfsSource(device_index)
    raise ValueError(f"unknown telemetry backend {name!r} (nvml, amdsmi, sysfs, none, auto)")
