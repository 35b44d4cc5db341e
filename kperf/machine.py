"""Describe this machine and its stack, and write asv's machine file.

``asv machine --yes --machine X`` stores only ``{"machine": X}`` (docs/facts.md), so
this tool writes the entry itself. Extra keys (gpu, arch, driver, rocm, cuda, torch,
triton, tilelang) become selectors in the published site.

    kperf machine            # print the description as JSON
    kperf machine --write    # merge it into ~/.asv-machine.json
    kperf machine --provenance   # + GPU clock/power state and software versions
    kperf machine --stack-name --write   # named after GPU model and stack,
                                    # e.g. mi300x-rocm6.4-torch2.6-triton3.3-tilelang0.1.15
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, load_json, parse_json, validate
from kperf.paths import safe_name

PROBE = r"""
import json, sys
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda or ""
    out["hip"] = torch.version.hip or ""
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out["gpu"] = p.name
        hip_arch = getattr(p, "gcnArchName", "")
        out["arch"] = hip_arch if torch.version.hip else f"sm_{p.major}{p.minor}"
        out["num_gpus"] = torch.cuda.device_count()
        out["gpu_torch_uuid"] = str(getattr(p, "uuid", "") or "")
except Exception as e:
    out["torch_error"] = repr(e)
for mod in ("triton", "tilelang"):
    try:
        out[mod] = __import__(mod).__version__
    except Exception as e:
        out[mod] = ""
print(json.dumps(out))
"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def probe_stack(python: str = sys.executable) -> dict[str, Any]:
    """Versions and GPU, read in a child process so this one never initialises a GPU."""
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1")
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, env=env,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"stack probe failed ({python}): {out.stderr.strip()[-2000:]}")
    source = f"stack probe of {python}"
    lines = out.stdout.strip().splitlines()
    return validate(parse_json(lines[-1] if lines else "", source), "stack-probe", source)


def rocm_version() -> str:
    path = Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version"
    return path.read_text().strip() if path.exists() else ""


# Identity keys that describe a run's conditions rather than the machine: kept out of
# the machine file, because every machine key becomes an asv graph parameter and a
# changing value would split a benchmark's history into many series.
STATE_PREFIX = "now_"
NOT_MACHINE_KEYS = frozenset({"telemetry_reason", "read_errors", "unsupported", "throttle_note",
                              "gpu_index_physical"})


def split_identity(identity: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stable facts for the machine file, snapshot of the GPU's state) of a telemetry identity."""
    stable: dict[str, Any] = {}
    state: dict[str, Any] = {}
    for key, value in identity.items():
        if value is None:
            continue
        volatile = key.startswith(STATE_PREFIX) or key in NOT_MACHINE_KEYS
        (state if volatile else stable)[key] = value
    return stable, state


def telemetry_identity() -> dict[str, Any]:
    from kperf.core.telemetry import open_source

    source = open_source()
    try:
        identity = {k: v for k, v in source.identity().items() if v is not None}
        if source.backend == "nvml":
            identity.update(nvml_clock_state(getattr(source, "_handle", None)))
        return identity
    finally:
        source.close()


def nvml_clock_state(handle: Any) -> dict[str, Any]:
    """Clock and power settings NVML exposes: were clocks or limits changed from default?

    NVML has no getter for locked GPU clocks (``nvidia-smi -lgc``); a lock shows as
    current == max clocks under load and as the ApplicationsClocksSetting reason (0x2).
    """
    if handle is None:
        return {}
    import pynvml as n

    def ask(call: Any, *args: Any) -> Any:
        try:
            return call(handle, *args)
        except n.NVMLError:
            return None

    sm, mem = n.NVML_CLOCK_SM, n.NVML_CLOCK_MEM
    app = (ask(n.nvmlDeviceGetApplicationsClock, sm), ask(n.nvmlDeviceGetApplicationsClock, mem))
    default_app = (ask(n.nvmlDeviceGetDefaultApplicationsClock, sm),
                   ask(n.nvmlDeviceGetDefaultApplicationsClock, mem))
    limit = ask(n.nvmlDeviceGetEnforcedPowerLimit)
    default_limit = ask(n.nvmlDeviceGetPowerManagementDefaultLimit)
    capability = ask(n.nvmlDeviceGetCudaComputeCapability)
    try:
        cuda_driver = n.nvmlSystemGetCudaDriverVersion_v2()
    except n.NVMLError:
        cuda_driver = None
    return {
        "gpu_serial": ask(n.nvmlDeviceGetSerial),
        "gpu_sm": f"sm_{capability[0]}{capability[1]}" if capability else None,
        "cuda_driver": f"{cuda_driver // 1000}.{cuda_driver % 1000 // 10}" if cuda_driver else None,
        "mem_clock_max_mhz": ask(n.nvmlDeviceGetMaxClockInfo, mem),
        "power_limit_default_w": default_limit / 1000.0 if default_limit else None,
        "power_limit_is_default": (limit == default_limit) if limit and default_limit else None,
        "app_clocks_are_default": (app == default_app) if None not in app + default_app else None,
        "now_app_sm_clock_mhz": app[0],
        "now_sm_clock_mhz": ask(n.nvmlDeviceGetClockInfo, sm),
        "now_mem_clock_mhz": ask(n.nvmlDeviceGetClockInfo, mem),
        "now_clock_event_reasons": ask(n.nvmlDeviceGetCurrentClocksEventReasons),
    }


def _ram() -> str:
    try:
        return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return ""


def _gather(name: str | None, python: str | None = None
            ) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """(machine-file entry, GPU state snapshot, stack probe) in one probe and one source."""
    stack = probe_stack(python or sys.executable)
    info: dict[str, Any] = {
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": platform.processor() or platform.machine(),
        "num_cpu": str(os.cpu_count()),
        "ram": _ram(),
        "torch": stack.get("torch", ""),
        "triton": stack.get("triton", ""),
        "tilelang": stack.get("tilelang", ""),
        "cuda": stack.get("cuda", ""),
        "rocm": rocm_version() or stack.get("hip", ""),
        "gpu": stack.get("gpu", "none"),
        "gpu_arch": stack.get("arch", ""),
    }
    state: dict[str, Any] = {}
    if stack.get("gpu"):
        stable, state = split_identity(telemetry_identity())
        for key, value in stable.items():
            # torch's view of the GPU wins (its arch carries the target features, e.g.
            # gfx942:sramecc+:xnack-); the ROCm install's version file beats the library's
            if key == "gpu" or (key in ("gpu_arch", "rocm") and info[key]):
                continue
            info[key] = value
    host = platform.node().split(".")[0] or "host"
    gpu_part = slug(info["gpu"]) if stack.get("gpu") else "cpu"
    uuid = str(info.get("gpu_uuid", ""))
    uuid_part = f"-{slug(uuid)[-8:]}" if uuid else ""
    info["machine"] = safe_name(name or f"{slug(host)}-{gpu_part}{uuid_part}", "machine name")
    return {k: str(v) for k, v in info.items()}, state, stack


def describe(name: str | None = None, python: str | None = None,
             stack: bool = False) -> dict[str, str]:
    """The machine entry; ``python``: the stack's interpreter (default this one);
    ``stack``: name the machine after the GPU model and stack unless ``name`` is given."""
    info = _gather(name, python)[0]
    if stack and not name:
        info["machine"] = safe_name(stack_name(info), "machine name (from the stack)")
    return info


def short_version(version: str) -> str:
    """'3.3.0+rocm6.4.1.git0' -> '3.3', '3.3.1' -> '3.3.1', '6.4.1-120' -> '6.4.1'."""
    release = re.split(r"[+\-]", version.strip(), maxsplit=1)[0]
    parts = [p for p in release.split(".") if p]
    while len(parts) > 2 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)


def gpu_model(gpu: str) -> str:
    """'AMD Instinct MI300X' -> 'mi300x', 'NVIDIA H200' -> 'h200'; no GPU -> 'cpu'."""
    if not gpu or gpu == "none":
        return "cpu"
    match = re.search(r"\b(MI\d+\w*|[A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu)
    return (match.group(1) if match else slug(gpu)).lower()


def stack_name(info: dict[str, str]) -> str:
    """A machine name per GPU model and stack: every stack gets its own results folder."""
    parts = [gpu_model(info.get("gpu", ""))]
    if info.get("rocm"):
        parts.append("rocm" + ".".join(short_version(info["rocm"]).split(".")[:2]))
    elif info.get("cuda"):
        parts.append("cuda" + short_version(info["cuda"]))
    for package in ("torch", "triton", "tilelang"):
        if info.get(package):
            parts.append(package + short_version(info[package]))
    return "-".join(parts)




def _dist_versions(names: tuple[str, ...]) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in names:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = ""
    return out


def provenance(name: str | None = None) -> dict[str, Any]:
    """Everything known about where a run happened: the machine entry, the GPU's clock and
    power state at this moment, and the software stack (for records and reports)."""
    info, state, stack = _gather(name)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent.parent).stdout.strip()
    except OSError:
        commit = ""
    return {
        "machine": info,
        "gpu_state": state,
        "software": {
            "python": platform.python_version(),
            "torch": stack.get("torch", ""),
            "torch_cuda": stack.get("cuda", ""),
            "torch_hip": stack.get("hip", ""),
            "triton": stack.get("triton", ""),
            "tilelang": stack.get("tilelang", ""),
            "rocm_info_version": rocm_version(),
            **_dist_versions(("amdsmi", "pyrsmi", "nvidia-ml-py", "asv", "asv_runner")),
            "harness_commit": commit,
        },
    }


def machine_file() -> Path:
    return Path(os.path.expanduser("~/.asv-machine.json"))


def write_machine_file(info: dict[str, str], path: Path | None = None) -> Path:
    """Merge one machine entry into asv's machine file.

    Shards of a multi-GPU run write their entries at the same time, and asv processes read
    the file meanwhile: the read-modify-write holds an exclusive lock, and the new content
    replaces the file atomically from a temporary file of its own (a full disk or a kill
    leaves the old file whole). The file is checked against kperf/schemas/machine-file.json
    first: a corrupt one is an error naming it, never overwritten.
    """
    import fcntl
    import tempfile

    path = path or machine_file()
    safe_name(info.get("machine"), "machine name")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data: dict[str, Any] = load_json(path, "machine-file", missing_ok=True) \
                or {"version": 1}
        except ConfigError as err:
            raise SystemExit(f"{err}; fix or remove it") from err
        data[info["machine"]] = info
        data["version"] = 1
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(data, indent=4, sort_keys=True))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", help="machine name (default: host-gpu-uuid)")
    parser.add_argument("--write", action="store_true", help="merge into ~/.asv-machine.json")
    parser.add_argument("--provenance", action="store_true",
                        help="print the full provenance (GPU clock state, software) instead")
    parser.add_argument("--stack-name", action="store_true",
                        help="name the machine after GPU model and stack (unless --name)")
    parser.add_argument("--python", help="the stack's interpreter to probe (default: this one)")
    args = parser.parse_args(argv)
    if args.provenance:
        print(json.dumps(provenance(args.name), indent=2, sort_keys=True))
        return 0
    info = describe(args.name, args.python, stack=args.stack_name)
    if args.write:
        print(f"wrote machine {info['machine']!r} to {write_machine_file(info)}")
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


def has_gpu() -> bool:
    """Whether this interpreter's torch sees a CUDA or ROCm GPU, asked of a child process
    (the caller never initialises a GPU)."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


if __name__ == "__main__":
    sys.exit(main())
