"""Opt-in GPU clock pinning for a dedicated benchmark machine. Never done by default.

    kperf clocks --lock-sm 1980 [--device 0]   # NVIDIA: locked GPU clocks (NVML)
                                                         # AMD: perf determinism (amdsmi)
    kperf clocks --restore                     # undo, from the saved state file
    kperf clocks check --sm 1980               # do the clocks match a lock now?

Needs root (or the vendor's equivalent permission). The state before the lock is saved
to ``--state-file`` (default ``$KPERF_CLOCKS_STATE`` or ``~/.kperf-clocks-state.json``);
``--restore`` reads it back and deletes it. After setting, the result is read back and
a lock that did not take is reported (exit 1). Exit 2: the request could not be made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_TOLERANCE_MHZ = 15.0  # NVML snaps to supported clocks; AMD DPM levels are coarse


class ClockError(RuntimeError):
    """The clocks could not be read or set (no driver, no permission, bad state file)."""


def state_file_default() -> Path:
    return Path(os.environ.get("KPERF_CLOCKS_STATE", "~/.kperf-clocks-state.json")).expanduser()


# ------------------------------------------------------------------ NVIDIA
class NvidiaClocks:
    vendor = "nvidia"

    def __init__(self, device: int) -> None:
        import pynvml

        from kperf.core.telemetry.nvml import nvml_handle

        self.n = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = nvml_handle(pynvml, device)
            self.index = int(pynvml.nvmlDeviceGetIndex(self.handle))
        except pynvml.NVMLError as err:
            raise ClockError(f"NVML: {err}") from None

    def _ask(self, call: Any, *args: Any) -> Any:
        try:
            return call(self.handle, *args)
        except self.n.NVMLError:
            return None

    def snapshot(self) -> dict[str, Any]:
        n = self.n
        return {
            "gpu_uuid": _text(self._ask(n.nvmlDeviceGetUUID)),
            "sm_clock_mhz": self._ask(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_SM),
            "sm_clock_max_mhz": self._ask(n.nvmlDeviceGetMaxClockInfo, n.NVML_CLOCK_SM),
            "app_sm_clock_mhz": self._ask(n.nvmlDeviceGetApplicationsClock, n.NVML_CLOCK_SM),
        }

    def lock(self, mhz: int) -> None:
        try:
            self.n.nvmlDeviceSetGpuLockedClocks(self.handle, mhz, mhz)
        except self.n.NVMLError as err:
            raise ClockError(f"nvmlDeviceSetGpuLockedClocks({mhz}, {mhz}): {err}") from None

    def restore(self, previous: dict[str, Any]) -> None:
        # NVML cannot read a previous lock back, so the default (unlocked) state is restored
        try:
            self.n.nvmlDeviceResetGpuLockedClocks(self.handle)
        except self.n.NVMLError as err:
            raise ClockError(f"nvmlDeviceResetGpuLockedClocks: {err}") from None

    def mismatch(self, mhz: float, tolerance: float) -> str | None:
        now = self._ask(self.n.nvmlDeviceGetClockInfo, self.n.NVML_CLOCK_SM)
        if now is None:
            return "the SM clock cannot be read"
        if abs(now - mhz) > tolerance:
            return (f"SM clock reads {now} MHz, requested {mhz:g} (an idle GPU can read lower; "
                    "check again under load)")
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.n.nvmlShutdown()


# ------------------------------------------------------------------ AMD
class AmdClocks:
    vendor = "amd"

    def __init__(self, device: int) -> None:
        from kperf.core.telemetry.amd import import_amdsmi, visible_physical_index

        try:
            self.smi = import_amdsmi()
            self.smi.amdsmi_init()
            handles = self.smi.amdsmi_get_processor_handles()
            self.index, _ = visible_physical_index(device, len(handles))
        except Exception as err:  # AmdSmiUnavailable, or amdsmi's own errors
            raise ClockError(f"amdsmi: {type(err).__name__}: {err}") from None
        self.handle = handles[self.index]

    def _ask(self, call: Any, *args: Any) -> Any:
        try:
            return call(self.handle, *args)
        except Exception:
            return None

    def snapshot(self) -> dict[str, Any]:
        smi = self.smi
        gfx = self._ask(smi.amdsmi_get_clock_info, smi.AmdSmiClkType.GFX) or {}
        level = self._ask(smi.amdsmi_get_gpu_perf_level) or ""
        return {
            "gpu_uuid": self._ask(smi.amdsmi_get_gpu_device_uuid),
            "perf_level": level.removeprefix("AMDSMI_DEV_PERF_LEVEL_") or None,
            "sm_clock_mhz": gfx.get("clk"),
            "sm_clock_max_mhz": gfx.get("max_clk"),
        }

    def lock(self, mhz: int) -> None:
        try:
            self.smi.amdsmi_set_gpu_perf_determinism_mode(self.handle, int(mhz))
        except Exception as err:
            raise ClockError(f"amdsmi_set_gpu_perf_determinism_mode({mhz}): {_why(err)}") from None

    def restore(self, previous: dict[str, Any]) -> None:
        smi = self.smi
        level = previous.get("perf_level") or "AUTO"
        try:
            if level == "DETERMINISM" and previous.get("sm_clock_max_mhz"):
                smi.amdsmi_set_gpu_perf_determinism_mode(self.handle,
                                                         int(previous["sm_clock_max_mhz"]))
            else:
                smi.amdsmi_set_gpu_perf_level(self.handle, smi.AmdSmiDevPerfLevel[level])
        except Exception as err:
            raise ClockError(f"restoring perf level {level}: {_why(err)}") from None

    def mismatch(self, mhz: float, tolerance: float) -> str | None:
        now = self.snapshot()
        if now["perf_level"] != "DETERMINISM":
            return f"perf level is {now['perf_level']}, not DETERMINISM"
        ceiling = now["sm_clock_max_mhz"]
        if not isinstance(ceiling, (int, float)) or abs(ceiling - mhz) > tolerance:
            return f"GFX clock ceiling reads {ceiling} MHz, requested {mhz:g}"
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.smi.amdsmi_shut_down()


def _why(err: Exception) -> str:
    code = getattr(err, "get_error_code", None)
    hint = " (status 10 = no permission: run as root)" if callable(code) and code() == 10 else ""
    return f"{type(err).__name__}: {err}{hint}"


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def open_clocks(vendor: str, device: int) -> NvidiaClocks | AmdClocks:
    """``vendor`` nvidia / amd / auto (NVML first, then amdsmi)."""
    kinds = {"nvidia": (NvidiaClocks,), "amd": (AmdClocks,), "auto": (NvidiaClocks, AmdClocks)}
    if vendor not in kinds:
        raise ClockError(f"unknown vendor {vendor!r} (nvidia, amd, auto)")
    reasons = []
    for kind in kinds[vendor]:
        try:
            return kind(device)
        except (ClockError, ImportError) as err:
            reasons.append(f"{kind.vendor}: {err}")
    raise ClockError("no GPU whose clocks can be managed: " + "; ".join(reasons))


# ------------------------------------------------------------------ commands
def lock(vendor: str, device: int, mhz: int, state_file: Path, tolerance: float,
         settle_s: float = 0.5, force: bool = False) -> tuple[int, str]:
    if state_file.exists() and not force:
        raise ClockError(f"{state_file} exists: clocks are already locked (run --restore first, "
                         "or --force to overwrite the saved state)")
    clocks = open_clocks(vendor, device)
    try:
        previous = clocks.snapshot()
        saved = {"vendor": clocks.vendor, "device": device, "physical_index": clocks.index,
                 "requested_sm_mhz": mhz, "previous": previous, "locked_at": time.time()}
        state_file.parent.mkdir(parents=True, exist_ok=True)
        state_file.write_text(json.dumps(saved, indent=1, sort_keys=True))
        try:
            clocks.lock(mhz)
        except ClockError:
            state_file.unlink()  # nothing changed: nothing to restore
            raise
        time.sleep(settle_s)
        problem = clocks.mismatch(mhz, tolerance)
    finally:
        clocks.close()
    if problem:
        return 1, f"lock requested at {mhz} MHz but not in effect: {problem}"
    return 0, f"{clocks.vendor} GPU {device}: SM clock locked at {mhz} MHz (state in {state_file})"


def restore(state_file: Path) -> tuple[int, str]:
    try:
        saved = json.loads(state_file.read_text())
    except FileNotFoundError:
        raise ClockError(f"{state_file}: no saved clock state (nothing was locked)") from None
    except json.JSONDecodeError as err:
        raise ClockError(f"{state_file}: not valid JSON ({err})") from None
    for key in ("vendor", "device", "previous"):
        if key not in saved:
            raise ClockError(f"{state_file}: field {key!r} missing")
    clocks = open_clocks(saved["vendor"], int(saved["device"]))
    try:
        uuid = clocks.snapshot().get("gpu_uuid")
        if saved["previous"].get("gpu_uuid") not in (None, uuid):
            raise ClockError(f"{state_file} was saved for GPU {saved['previous']['gpu_uuid']}, "
                             f"device {saved['device']} is now {uuid}")
        clocks.restore(saved["previous"])
        after = clocks.snapshot()
    finally:
        clocks.close()
    state_file.unlink()
    return 0, f"{saved['vendor']} GPU {saved['device']}: clocks restored ({json.dumps(after)})"


def check(vendor: str, device: int, mhz: float, tolerance: float) -> tuple[int, str]:
    clocks = open_clocks(vendor, device)
    try:
        problem = clocks.mismatch(mhz, tolerance)
        now = clocks.snapshot()
    finally:
        clocks.close()
    if problem:
        return 1, f"clocks do not match a lock at {mhz:g} MHz: {problem}"
    return 0, f"clocks match a lock at {mhz:g} MHz ({json.dumps(now)})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0, help="torch/HIP/CUDA device index")
    parser.add_argument("--vendor", default="auto", choices=("auto", "nvidia", "amd"))
    parser.add_argument("--state-file", type=Path, default=state_file_default())
    parser.add_argument("--tolerance-mhz", type=float, default=DEFAULT_TOLERANCE_MHZ)
    if argv[:1] == ["check"]:
        parser.add_argument("--sm", type=float, required=True, help="the locked SM clock, MHz")
        args = parser.parse_args(argv[1:])
        action = lambda: check(args.vendor, args.device, args.sm, args.tolerance_mhz)
    else:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--lock-sm", type=int, metavar="MHZ", help="lock the SM/GFX clock")
        group.add_argument("--restore", action="store_true", help="undo a lock")
        parser.add_argument("--force", action="store_true", help="overwrite a saved state")
        parser.add_argument("--settle-s", type=float, default=0.5,
                            help="wait before reading the clocks back")
        args = parser.parse_args(argv)
        if args.restore:
            action = lambda: restore(args.state_file)
        else:
            action = lambda: lock(args.vendor, args.device, args.lock_sm,
                                  args.state_file, args.tolerance_mhz, args.settle_s, args.force)
    try:
        code, message = action()
    except ClockError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(message, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
