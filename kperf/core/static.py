"""Static figures of generated device code: registers, scratch, LDS/shared bytes, occupancy.

Inputs are the artifacts a kernel's ``aot`` produced for a target that need not be
present: a gfx942 code object (``hsaco``: Triton's own, or TileLang's HIP source compiled
by ``kperf.core.hip``; read by ``kperf.core.codeobj`` the same way for both), AMDGCN assembly
text (Triton for gfx942: LLVM's own register and occupancy comments), a cubin (Triton or
TileLang for sm_90a), or device source.
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

# Resident waves per SIMD on CDNA3 and warps per SM sub-partition on Hopper: both are
# "waves per scheduler", so occupancy reads the same way on both vendors.
NV_WARPS_PER_SM = 64
NV_SCHEDULERS_PER_SM = 4
NV_REGS_PER_SM = 65536
NV_SHARED_PER_SM = 228 * 1024
NV_MAX_BLOCKS_PER_SM = 32

FIGURES = ("registers", "scratch_bytes", "shared_bytes", "occupancy")


class FigureUnavailable(NotImplementedError):
    """The artifacts for this target cannot give this figure (asv records a skip)."""


def _amdgcn_int(text: str, key: str) -> int | None:
    match = re.search(rf"^\s*;\s*{re.escape(key)}:\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _amdgcn_meta(text: str, key: str) -> int | None:
    match = re.search(rf"^\s*\.{re.escape(key)}:\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def parse_amdgcn(text: str) -> dict[str, int]:
    """Read the register/occupancy comments LLVM's AMDGPU backend writes into the assembly."""
    figures = {
        "registers": _amdgcn_int(text, "TotalNumVgprs") or _amdgcn_int(text, "NumVgprs"),
        # LLVM 19 prints NumSgprs; LLVM 20 and later (Triton 3.7's) TotalNumSgprs
        "sgprs": _amdgcn_int(text, "TotalNumSgprs") or _amdgcn_int(text, "NumSgprs"),
        "scratch_bytes": _amdgcn_int(text, "ScratchSize"),
        "occupancy": _amdgcn_int(text, "Occupancy"),
        "vgpr_spills": _amdgcn_meta(text, "vgpr_spill_count"),
        "sgpr_spills": _amdgcn_meta(text, "sgpr_spill_count"),
        "lds_static_bytes": _amdgcn_meta(text, "group_segment_fixed_size"),
    }
    missing = [k for k in ("registers", "occupancy") if figures[k] is None]
    if missing:
        raise ValueError(f"AMDGCN text has no {missing} comment: not LLVM AMDGPU assembly?")
    return {k: v for k, v in figures.items() if v is not None}


def cuobjdump_path() -> str:
    """cuobjdump from PATH, else the copy Triton bundles."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    import importlib.util

    spec = importlib.util.find_spec("triton")
    if spec and spec.origin:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.exists():
            return str(bundled)
    raise FileNotFoundError("cuobjdump not on PATH and not bundled with triton")


def parse_resource_usage(text: str) -> dict[str, int]:
    """Parse ``cuobjdump --dump-resource-usage``; the largest kernel wins if there are several."""
    rows = re.findall(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", text)
    if not rows:
        raise ValueError("no 'REG:.. STACK:.. SHARED:.. LOCAL:..' line in cuobjdump output")
    reg, stack, shared, local = max((tuple(map(int, r)) for r in rows), key=lambda r: r[0])
    return {"registers": reg, "scratch_bytes": stack + local, "static_shared_bytes": shared}


SASS_BYTES_PER_INSTRUCTION = 16  # Volta and later encode every instruction in 128 bits
_SASS_LINE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_SASS_WIDTH = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128}
# ldmatrix / stmatrix: .M88 moves one 8x8 16-bit matrix (32 bits a lane), .2 and .4 more
_SASS_MATRIX_COPIES = {"2": 2, "4": 4}


def _sass_bits(parts: list[str]) -> int:
    if parts[0] in ("LDSM", "STSM"):
        return 32 * next((_SASS_MATRIX_COPIES[p] for p in parts[1:] if p in _SASS_MATRIX_COPIES), 1)
    return next((_SASS_WIDTH[p] for p in parts[1:] if p in _SASS_WIDTH), 32)


_SASS_MEMORY = {"LDG": "global_load", "LDGSTS": "global_load", "STG": "global_store",
                "LDS": "lds_read", "LDSM": "lds_read", "STS": "lds_write", "STSM": "lds_write"}


def _sass_kind(opcode: str) -> str | None:
    """The mix key of one SASS opcode, named as for gfx942 (``kperf.core.codeobj``)."""
    parts = opcode.split(".")
    if parts[0] in ("HGMMA", "HMMA", "QGMMA", "IMMA", "IGMMA", "BGMMA"):
        return "matrix"
    if parts[0] in _SASS_MEMORY:
        return f"{_SASS_MEMORY[parts[0]]}.{_sass_bits(parts)}"
    if parts[0] in ("UTMALDG", "UBLKCP"):
        return "tma_load"
    if parts[0] == "UTMASTG":
        return "tma_store"
    if parts[0] == "BAR":
        return "barrier"
    if parts[0] == "DEPBAR" or opcode.startswith(("WARPGROUP.DEPBAR", "SYNCS.PHASECHK")):
        return "wait"
    return None


def parse_sass(text: str) -> dict[str, int]:
    """Code size and instruction mix of ``cuobjdump -sass`` text (every kernel in it)."""
    mix: dict[str, int] = {}
    count = 0
    for line in text.splitlines():
        match = _SASS_LINE.match(line)
        if not match:
            continue
        count += 1
        kind = _sass_kind(match.group(1))
        if kind:
            mix[kind] = mix.get(kind, 0) + 1
    if not count:
        raise ValueError("no SASS instruction in cuobjdump -sass output")
    mix["instructions"] = count
    return {"code_bytes": count * SASS_BYTES_PER_INSTRUCTION,
            **{f"isa.{k}": v for k, v in sorted(mix.items())}}


def _cuobjdump(cubin: bytes, flag: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([cuobjdump_path(), flag, f.name], capture_output=True, text=True,
                              check=True, timeout=60).stdout


_SASS_CODE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+([^;]*;)")


def sass_digest(sass: str, resources: dict[str, int]) -> str:
    """What the device runs, as a digest (``kperf.core.codeobj.code_digest`` for SASS): each
    instruction with its operands, in order, and the kernel's resources; addresses,
    encodings and function names are left out."""
    import hashlib

    digest = hashlib.sha256()
    for line in sass.splitlines():
        match = _SASS_CODE.match(line)
        if match:
            text = re.sub(r"`\([^)]*\)", "`()", match.group(1))  # branch targets by name
            digest.update(" ".join(text.split()).encode() + b"\n")
    digest.update(repr(sorted(resources.items())).encode())
    return digest.hexdigest()[:16]


def parse_cubin(cubin: bytes) -> dict[str, int | str]:
    resources = parse_resource_usage(_cuobjdump(cubin, "--dump-resource-usage"))
    sass = _cuobjdump(cubin, "-sass")
    return resources | parse_sass(sass) | {"code_sha": sass_digest(sass, resources)}


def nvidia_occupancy(registers: int, threads: int, shared_bytes: int) -> tuple[float, str]:
    """(resident warps per SM sub-partition, max 16 on Hopper; what limits it): the least
    of what the registers, the shared memory, the warp slots and the block slots allow."""
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(registers * 32 / 256) * 256  # allocated in 256-register units
    blocks_by = {
        "registers": NV_REGS_PER_SM // (regs_per_warp * warps) if registers
        else NV_MAX_BLOCKS_PER_SM,
        "shared": NV_SHARED_PER_SM // (shared_bytes + 1024) if shared_bytes
        else NV_MAX_BLOCKS_PER_SM,
        "warps": NV_WARPS_PER_SM // warps,
        "blocks": NV_MAX_BLOCKS_PER_SM,
    }
    blocks = min(blocks_by.values())
    limit = "+".join(name for name, value in blocks_by.items() if value == blocks)
    return blocks * warps / NV_SCHEDULERS_PER_SM, limit


def unavailable(target: str, backend: str, toolchain: str | None = None) -> str:
    """Why this machine cannot make a kernel's device binary and static figures for
    ``target`` ('' where it can): gfx942 needs LLVM 19's readers of code objects, and
    TileLang's HIP source a gfx942 toolchain (``kperf.core.hip``); gfx950 also a ROCm
    LLVM's disassembler, and for TileLang clang22; sm_90a needs cuobjdump, and
    TileLang nvcc; Triton its backend for the target. A GPU runner set up without the gfx942
    tools leaves those figures to a machine that has them (docs/amd.md)."""
    import importlib.util

    from kperf.core import hip

    try:
        if target.startswith("gfx"):
            for tool in ("llvm-readelf", "llvm-objdump"):
                hip.tool_path(tool)
            hip.disassembler(target)
            if backend == "tilelang":
                chain = hip.toolchain(toolchain, target)
                hip.hip_tree()
                if chain.kit is None:
                    hip.tool_path("clang")
                    if chain.libllvm is not None:
                        hip.tool_path("ld.lld")
        else:
            cuobjdump_path()
            if backend == "tilelang" and not nvcc_path():
                return "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda): TileLang's sm_90a build"
    except (hip.ToolchainMissing, FileNotFoundError) as err:
        return str(err)
    vendor = "amd" if target.startswith("gfx") else "nvidia"
    if backend == "triton" and importlib.util.find_spec(f"triton.backends.{vendor}") is None:
        return f"Triton has no {vendor} backend here"
    return ""


def nvcc_path() -> str | None:
    """The nvcc TileLang compiles sm_90a with, found as TileLang finds it: $CUDA_HOME,
    PATH, the ``nvidia-cuda-nvcc`` wheel (CUDA 13 ships nvcc on PyPI), /usr/local/cuda."""
    import importlib.metadata
    import os

    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [str(Path(home) / "bin" / "nvcc")] if home else []
    candidates.append(shutil.which("nvcc") or "")
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        candidates += [str(f.locate()) for f in importlib.metadata.files("nvidia-cuda-nvcc")
                       or [] if f.name == "nvcc"]
    candidates.append("/usr/local/cuda/bin/nvcc")
    return next((c for c in candidates if c and Path(c).is_file()), None)


def figures(artifacts: dict[str, Any], vendor: str) -> dict[str, float]:
    """All static figures the artifacts allow; figures they cannot give are absent."""
    out: dict[str, float] = {}
    shared = artifacts.get("shared_bytes")
    if "amdgcn" in artifacts:
        out.update(parse_amdgcn(artifacts["amdgcn"]))
    if "hsaco" in artifacts:
        from kperf.core import codeobj

        if "occupancy" in out:  # LLVM's, which sees only static LDS
            out["occupancy_llvm"] = out.pop("occupancy")
        out.update(codeobj.figures(artifacts["hsaco"], dynamic_lds_bytes=shared or 0,
                                   threads=artifacts.get("threads")))
        return _with_source(out, artifacts)
    if "cubin" in artifacts:
        out.update(parse_cubin(artifacts["cubin"]))
        shared_total = (shared or 0) + out.get("static_shared_bytes", 0)
        if "threads" in artifacts:
            out["occupancy"], out["occupancy_limit"] = nvidia_occupancy(
                out["registers"], artifacts["threads"], shared_total)
    if shared is not None:
        out["shared_bytes"] = shared + out.get("static_shared_bytes", 0)
    return _with_source(out, artifacts)


def _with_source(out: dict[str, float], artifacts: dict[str, Any]) -> dict[str, float]:
    if "source" in artifacts:
        out["source_bytes"] = len(artifacts["source"])
    return out


def figure(artifacts: dict[str, Any], vendor: str, name: str, what: str) -> float:
    values = figures(artifacts, vendor)
    if name not in values:
        have = sorted(k for k in artifacts if k != "config")
        raise FigureUnavailable(f"{what}: {name} cannot be read from {have}")
    return values[name]


def register_headroom(figures: dict[str, Any], amd: bool) -> str:
    """How many registers the kernel may use at its occupancy: "252 of 256 VGPRs for 2
    waves" (gfx942; sm_90a: registers a thread for warps per scheduler); '' where the
    figures do not say."""
    try:
        regs, waves = int(figures["registers"]), figures["occupancy"]
        threads, shared = int(figures["threads"]), int(figures.get("shared_bytes") or 0)
    except (KeyError, TypeError, ValueError):
        return ""
    if not waves:
        return ""
    if amd:
        from kperf.core.codeobj import LDS_PER_CU, VGPRS_PER_SIMD_LANE, occupancy

        sgprs = int(figures.get("sgprs") or 0)
        lds = int(figures.get("lds_per_cu_bytes") or LDS_PER_CU)  # gfx942's before gfx950
        most = max((v for v in range(regs, VGPRS_PER_SIMD_LANE + 1)
                    if occupancy(v, sgprs, shared, threads, lds)[0] >= waves), default=regs)
        return f"{regs} of {most} VGPRs for {_plural(waves, 'wave')}"
    most = max((r for r in range(regs, 256)
                if nvidia_occupancy(r, threads, shared)[0] >= waves), default=regs)
    return f"{regs} of {most} registers a thread for {_plural(waves, 'warp')} a scheduler"


def _plural(count: float, word: str) -> str:
    return f"{count:g} {word}" + ("" if count == 1 else "s")
