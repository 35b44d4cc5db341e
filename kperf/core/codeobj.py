"""Static figures of a gfx942 or gfx950 code object, read the same way for TileLang and Triton.

From the code object's own metadata (``llvm-readelf --notes``): VGPRs (architectural plus
accumulation registers, which share one file on CDNA3), AGPRs, SGPRs, scratch, spills,
static LDS and the work-group size; from its symbol table the code size; from its
disassembly (``llvm-objdump -d``) an instruction mix. Occupancy is computed here, by one
rule for both languages, counting the LDS a launch asks for at run time as well as the
static LDS (LLVM's own occupancy figure sees only the static part, and TileLang's and
Triton's kernels take all their LDS dynamically), for the work-group size of the launch. The
rules are LLVM 19's for gfx942, checked against clang-19's own figures on real code objects
(docs/amd.md, "Occupancy"; tests/test_codeobj_llvm.py); gfx950 keeps gfx942's register file
and wave slots and has 160 KiB of LDS (LLVM 22's rules, checked against clang 22's figures:
tests/test_gfx950.py). The target is read from the code object's own ELF flags; LLVM 19
cannot disassemble gfx950, so its code is disassembled by a ROCm release's LLVM
(``kperf.core.amdgpu_disasm``).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

WAVE_SIZE = 64
SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD_LANE = 512  # architectural + accumulation, one file on gfx90a / gfx942
VGPR_GRANULE = 8
# LLVM's table for VI..GFX9, not a division of a register file: (most SGPRs, waves)
SGPR_WAVES = ((80, 10), (88, 9), (100, 8))
SGPR_WAVES_OVER = 7
LDS_PER_CU = 64 * 1024  # gfx942's
# EF_AMDGPU_MACH of the ELF header's flags -> (target, LDS bytes a CU has)
MACHINES = {0x4C: ("gfx942", LDS_PER_CU), 0x4F: ("gfx950", 160 * 1024)}
MAX_THREADS_PER_GROUP = 1024
CANNOT_LAUNCH = "cannot launch"

_METADATA_KEYS = ("name", "vgpr_count", "agpr_count", "sgpr_count", "vgpr_spill_count",
                  "sgpr_spill_count", "group_segment_fixed_size", "private_segment_fixed_size",
                  "max_flat_workgroup_size", "wavefront_size")


def _run_tool(tool: str, args: list[str], code_object: bytes) -> str:
    from kperf.core.hip import tool_path

    return _run_on([tool_path(tool), *args], code_object, tool)


def _run_on(cmd: list[str], code_object: bytes, who: str) -> str:
    """The output of ``cmd`` given the code object as a file, its last argument."""
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(code_object)
        f.flush()
        out = subprocess.run([*cmd, f.name], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ValueError(f"{who} cannot read the code object: {out.stderr.strip()[-500:]}")
    return out.stdout


def machine(code_object: bytes) -> tuple[str, int]:
    """(target, LDS bytes a CU has) of a code object, from its ELF header's flags."""
    if code_object[:4] != b"\x7fELF" or len(code_object) < 0x34:
        raise ValueError("not an ELF code object")
    mach = int.from_bytes(code_object[0x30:0x34], "little") & 0xFF
    if mach not in MACHINES:
        raise ValueError(f"code object for EF_AMDGPU_MACH {mach:#x}: not gfx942 or gfx950")
    return MACHINES[mach]


def disassemble(code_object: bytes, arch: str) -> str:
    """``llvm-objdump -d`` text of the code object: LLVM 19's for gfx942, a ROCm release's
    LLVM's (``kperf.core.hip.disassembler``) for what LLVM 19 does not know."""
    from kperf.core import hip

    library = hip.disassembler(arch)
    if library is None:
        return _run_tool("llvm-objdump", ["-d", f"--mcpu={arch}", "--no-show-raw-insn"],
                         code_object)
    script = Path(__file__).with_name("amdgpu_disasm.py")
    return _run_on([sys.executable, str(script), str(library), "--mcpu", arch], code_object,
                   str(library))


def parse_kernel_metadata(notes: str) -> list[dict[str, int | str]]:
    """Each kernel's entry of the AMDGPU metadata note (``llvm-readelf --notes`` text)."""
    block = notes.split("amdhsa.kernels:", 1)
    if len(block) < 2:
        raise ValueError("no amdhsa.kernels in the code object's notes: not an AMDGPU code object?")
    kernels: list[dict[str, int | str]] = []
    for line in block[1].splitlines():
        if re.match(r"^\S", line):  # the next top-level key: the kernel list ended
            break
        match = re.match(r"^  ([- ]) \.(\w+):\s+(\S+)\s*$", line)
        if not match:
            continue
        starts, key, value = match.groups()
        if starts == "-":
            kernels.append({})
        if key in _METADATA_KEYS and kernels:
            kernels[-1][key] = int(value) if re.fullmatch(r"\d+", value) else value
    return kernels


def parse_symbol_sizes(symbols: str) -> dict[str, int]:
    """Code bytes of each function symbol (``llvm-readelf -s`` text)."""
    sizes: dict[str, int] = {}
    for match in re.finditer(r"^\s*\d+:\s+[0-9a-f]+\s+(\d+)\s+FUNC\s+\S+\s+\S+\s+\S+\s+(\S+)\s*$",
                             symbols, re.MULTILINE):
        sizes[match.group(2)] = int(match.group(1))
    return sizes


_WIDTH_BITS = {"ubyte": 8, "sbyte": 8, "u8": 8, "i8": 8, "byte": 8, "ushort": 16, "sshort": 16,
               "u16": 16, "i16": 16, "short": 16, "dword": 32, "b32": 32, "dwordx2": 64, "b64": 64,
               "dwordx3": 96, "b96": 96, "dwordx4": 128, "b128": 128}


def _memory_class(mnemonic: str) -> str | None:
    """``global_load.128``, ``lds_read.16``, ...: the kind of a memory instruction and the bits
    each lane moves (``ds_read2`` moves two elements); None for any other instruction."""
    match = re.match(r"^(global|buffer|flat)_(load|store)_(?:lds_)?([a-z]+\d*(?:x\d)?)", mnemonic)
    if match:
        bits = _WIDTH_BITS.get(match.group(3))
        return f"global_{match.group(2)}.{bits}" if bits else f"global_{match.group(2)}.other"
    match = re.match(r"^ds_(read|write|load|store)(2(?:st64)?)?_([a-z]+\d+)", mnemonic)
    if match:
        direction = "read" if match.group(1) in ("read", "load") else "write"
        bits = _WIDTH_BITS.get(match.group(3))
        if bits and match.group(2):
            bits *= 2
        return f"lds_{direction}.{bits}" if bits else f"lds_{direction}.other"
    return None


def instruction_mix(disassembly: str) -> dict[str, int]:
    """Static counts over the code, named as for NVIDIA's SASS (``kperf.core.static``):
    ``matrix`` (MFMA), global and LDS accesses by width, ``wait`` (s_waitcnt),
    ``barrier`` (s_barrier) and all ``instructions``."""
    mix: Counter[str] = Counter()
    for line in disassembly.splitlines():
        match = re.match(r"^\s+([a-z][a-z0-9_]*)\b", line)
        if not match:
            continue
        mnemonic = match.group(1)
        mix["instructions"] += 1
        if mnemonic.startswith("v_mfma") or mnemonic.startswith("v_smfmac"):
            mix["matrix"] += 1
        elif mnemonic in _SYNC:
            mix[_SYNC[mnemonic]] += 1
        elif kind := _memory_class(mnemonic):
            mix[kind] += 1
    return dict(sorted(mix.items()))


_SYNC = {"s_waitcnt": "wait", "s_barrier": "barrier"}


def code_digest(disassembly: str, resources: dict[str, int | str]) -> str:
    """What the device runs, as a digest: every instruction with its operands, in order,
    and the kernel's resources (registers, LDS, scratch). Addresses, encodings and symbol
    names are left out, so a renamed kernel or a moved line of source whose code is the
    same digests the same; two sources that give one code object read "code unchanged"."""
    import hashlib

    digest = hashlib.sha256()
    for line in disassembly.splitlines():
        match = re.match(r"^\s+([a-z][a-z0-9_]*\b[^/]*)", line)
        if match:  # an instruction; its "// address: encoding" comment dropped
            text = re.sub(r"<[^>]*>", "<>", match.group(1))
            digest.update(" ".join(text.split()).encode() + b"\n")
    digest.update(repr(sorted((k, v) for k, v in resources.items() if k != "name")).encode())
    return digest.hexdigest()[:16]


def occupancy(vgprs: int, sgprs: int, lds_bytes: int, threads: int,
              lds_per_cu: int = LDS_PER_CU) -> tuple[int, str]:
    """(waves per SIMD, what limits it) for work-groups of ``threads`` that each take
    ``lds_bytes`` of LDS (static + dynamic): the least of what the VGPRs, the SGPRs, the
    LDS, the work-group slots and the wave slots allow; ties name each limit. A work-group
    that cannot be resident at all gives 0 and says why, ending "cannot launch"."""
    if threads < 1:
        raise ValueError(f"threads per work-group must be at least 1, not {threads}")
    if threads > MAX_THREADS_PER_GROUP:
        return 0, f"over {MAX_THREADS_PER_GROUP} threads a work-group: {CANNOT_LAUNCH}"
    if lds_bytes > lds_per_cu:
        return 0, (f"LDS over {lds_per_cu // 1024} KiB a work-group ({lds_bytes} bytes): "
                   f"{CANNOT_LAUNCH}")
    waves_per_group = math.ceil(threads / WAVE_SIZE)
    # LLVM also holds groups of 2 waves or more to 16 a CU (one barrier each): with 32
    # wave slots a CU that never binds on gfx942
    group_slots = MAX_WAVES_PER_SIMD * SIMDS_PER_CU // waves_per_group

    def per_simd(groups: int) -> int:
        return min(math.ceil(groups * waves_per_group / SIMDS_PER_CU), MAX_WAVES_PER_SIMD)

    limits = {
        "VGPRs": MAX_WAVES_PER_SIMD if vgprs < VGPR_GRANULE else min(
            MAX_WAVES_PER_SIMD,
            max(1, VGPRS_PER_SIMD_LANE // (math.ceil(vgprs / VGPR_GRANULE) * VGPR_GRANULE))),
        "SGPRs": min(MAX_WAVES_PER_SIMD, next(
            (waves for most, waves in SGPR_WAVES if sgprs <= most), SGPR_WAVES_OVER)),
        "LDS": per_simd(lds_per_cu // lds_bytes) if lds_bytes else MAX_WAVES_PER_SIMD,
        "work-groups": per_simd(group_slots),
        "waves": MAX_WAVES_PER_SIMD,
    }
    waves = min(limits.values())
    # a resource that allows the full wave slots is not a limit of its own: "waves" says it
    binding = [name for name, value in limits.items()
               if value == waves and (value < MAX_WAVES_PER_SIMD or name == "waves")]
    return waves, "+".join(binding)


def main_kernel(kernels: list[dict[str, int | str]]) -> dict[str, int | str]:
    """The kernel the figures describe: the only one, or the one with the most VGPRs."""
    if not kernels:
        raise ValueError("the code object has no kernel")
    return max(kernels, key=lambda k: int(k.get("vgpr_count", 0)))


def kernel_figures(kernel: dict[str, int | str], dynamic_lds_bytes: int = 0,
                   threads: int | None = None,
                   lds_per_cu: int = LDS_PER_CU) -> dict[str, float | str]:
    """A kernel's resources and occupancy, from its metadata entry (``parse_kernel_metadata``).

    ``threads``: the launch's work-group size, where the caller knows it; else the kernel's
    ``max_flat_workgroup_size`` (the most it may be launched with, which LLVM's own figure
    assumes), and ``threads_from`` says which."""
    if "max_flat_workgroup_size" not in kernel:
        raise ValueError(f"{kernel.get('name')}: no .max_flat_workgroup_size in the metadata")
    vgprs, sgprs = int(kernel["vgpr_count"]), int(kernel["sgpr_count"])
    lds_static = int(kernel.get("group_segment_fixed_size", 0))
    lds_total = lds_static + dynamic_lds_bytes
    most = int(kernel["max_flat_workgroup_size"])
    threads_from = "launch" if threads is not None else "max_flat_workgroup_size"
    threads = most if threads is None else threads
    if threads > most:
        waves, limit = 0, f"{threads} threads over the kernel's maximum {most}: {CANNOT_LAUNCH}"
    else:
        waves, limit = occupancy(vgprs, sgprs, lds_total, threads, lds_per_cu)
    return {
        "registers": vgprs, "agprs": int(kernel.get("agpr_count", 0)), "sgprs": sgprs,
        "scratch_bytes": int(kernel.get("private_segment_fixed_size", 0)),
        "vgpr_spills": int(kernel.get("vgpr_spill_count", 0)),
        "sgpr_spills": int(kernel.get("sgpr_spill_count", 0)),
        "lds_static_bytes": lds_static, "shared_bytes": lds_total, "threads": threads,
        "threads_from": threads_from, "occupancy": waves, "occupancy_limit": limit,
        "lds_per_cu_bytes": lds_per_cu,  # the target's, for the headroom at this occupancy
    }


def figures(code_object: bytes, dynamic_lds_bytes: int = 0,
            threads: int | None = None) -> dict[str, float | str]:
    """Every figure a gfx942 or gfx950 code object gives (``kernel_figures`` of its main
    kernel, for the launch's ``threads`` where known), its instruction mix under
    ``isa.<kind>``."""
    arch, lds_per_cu = machine(code_object)
    kernel = main_kernel(parse_kernel_metadata(_run_tool("llvm-readelf", ["--notes"], code_object)))
    sizes = parse_symbol_sizes(_run_tool("llvm-readelf", ["-s", "--wide"], code_object))
    disassembly = disassemble(code_object, arch)
    out = kernel_figures(kernel, dynamic_lds_bytes, threads, lds_per_cu)
    out["code_bytes"] = sum(sizes.values())
    out.update({f"isa.{kind}": count for kind, count in instruction_mix(disassembly).items()})
    out["code_sha"] = code_digest(disassembly, kernel)
    return out
