"""Describe this machine and its stack, and write asv's machine file.

``asv machine --yes --machine X`` stores only ``{"machine": X}`` (shared/DESIGN.md), so
this tool writes the entry itself. Extra keys (gpu, arch, driver, rocm, cuda, torch,
triton, tilelang) become selectors in the published site.

    python -m tools.machine            # print the description as JSON
    python -m tools.machine --write    # merge it into ~/.asv-machine.json
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
except Exception as e:
    out["torch_error"] = repr(e)
for mod in ("triton", "tilelang"):
    try:
        out[mod] = __import__(mod).__version__
    except Exception as e:
        out[mod] = ""
print(json.dumps(out))
"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def probe_stack(python: str = sys.executable) -> dict[str, Any]:
    """Versions and GPU, read in a child process so this one never initialises a GPU."""
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1")
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, env=env,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"stack probe failed ({python}): {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def rocm_version() -> str:
    path = Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / ".info" / "version"
    return path.read_text().strip() if path.exists() else ""


def telemetry_identity() -> dict[str, Any]:
    from harness.telemetry import open_source

    source = open_source()
    try:
        return {k: v for k, v in source.identity().items() if v is not None}
    finally:
        source.close()


def _ram() -> str:
    try:
        return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return ""


def describe(name: str | None = None) -> dict[str, str]:
    stack = probe_stack()
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
    if stack.get("gpu"):
        info.update({k: v for k, v in telemetry_identity().items() if k != "gpu"})
    host = platform.node().split(".")[0] or "host"
    gpu_part = _slug(info["gpu"]) if stack.get("gpu") else "cpu"
    uuid = str(info.get("gpu_uuid", ""))
    uuid_part = f"-{_slug(uuid)[-8:]}" if uuid else ""
    info["machine"] = name or f"{_slug(host)}-{gpu_part}{uuid_part}"
    return {k: str(v) for k, v in info.items()}


def machine_file() -> Path:
    return Path(os.path.expanduser("~/.asv-machine.json"))


def write_machine_file(info: dict[str, str], path: Path | None = None) -> Path:
    path = path or machine_file()
    data: dict[str, Any] = {"version": 1}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise SystemExit(f"{path}: not valid JSON ({err}); fix or remove it") from err
    data[info["machine"]] = info
    data["version"] = 1
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=4, sort_keys=True))
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", help="machine name (default: host-gpu-uuid)")
    parser.add_argument("--write", action="store_true", help="merge into ~/.asv-machine.json")
    args = parser.parse_args(argv)
    info = describe(args.name)
    if args.write:
        print(f"wrote machine {info['machine']!r} to {write_machine_file(info)}")
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
