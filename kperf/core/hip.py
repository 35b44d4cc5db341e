"""HIP device code compiled for gfx942 on a machine without ROCm: TileLang's path to a code object.

On a ROCm machine TileLang hands its HIP source to hipcc. Here the same source goes to a
*toolchain* that stands in for hipcc (docs/amd.md has the recipe, what works and what not):

- ``clang19`` (default): Debian's clang-19 compiles straight to a code object, as hipcc's
  clang does (one process: front end, ``-O3`` pipeline, back end, ld.lld).
- ``llvm19`` and ``rocm-<version>``: clang-19's front end writes unoptimised bitcode; the
  toolchain's own LLVM (Debian's libLLVM-19, or the librocmllvm.so of that ROCm release)
  runs the ``-O3`` pipeline and the AMDGPU back end (``kperf/core/amdgpu_backend.py``), and
  ld.lld-19 links the object. ``llvm19`` gives exactly ``clang19``'s code (tested), so a
  difference under ``rocm-<version>`` is that release's optimiser and code generator.

Every toolchain uses the same HIP 6.4.3 headers and ROCm 6.0 device libraries (Debian's
packages, carried in kperf/toolchains/debian/ and unpacked by ``kperf.toolchains install``):
a ROCm version here varies the compiler, not the headers. Triton brings its own LLVM and
is not compiled by these toolchains.

gfx950 needs LLVM 20 or later, which Debian bookworm does not have: its front end is
``clang22``, the clang 22.1.8 and ld.lld inside PyPI's ziglang wheel, with clang 22's
resource headers and ROCm 7.0.2's device libraries (``kperf toolchain fetch clang22``). The
default toolchain and ``llvm19`` compile gfx950 with it in one process, as clang19 does
gfx942; a ``rocm-<version>`` toolchain takes its textual IR (bitcode of a newer LLVM is
unreadable to an older one) less the attributes its LLVM does not know, where its LLVM is 22
or later (ROCm 6.4.4's LLVM 19 cannot parse the IR, 7.0.2's LLVM 20 crashes on it: tried
2026-12-07, docs/amd.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

DEFAULT_TOOLCHAIN = "clang19"
TOOLCHAIN_ENV = "KPERF_ROCM_TOOLCHAIN"
ROOT_ENV = "KPERF_ROCM_ROOT"
CLANG_TIMEOUT_S = 300
BACKEND = Path(__file__).with_name("amdgpu_backend.py")
DEBIAN_LIBLLVM19 = Path("/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1")
CLANG22 = "clang22"
# targets LLVM 19 does not know: compiled by clang22's front end
NEEDS_CLANG22 = frozenset({"gfx950"})
# the oldest LLVM (major) that reads clang 22's textual IR once NEWER_IR_ATTRIBUTES are gone
OLDEST_IR_READER = 22
# attributes clang 22.1.8 writes that ROCm 7.2.2's LLVM (22.0.0git) cannot parse; each is a
# promise ("creates no undef or poison") whose absence only forgoes an optimisation
NEWER_IR_ATTRIBUTES = ("nocreateundeforpoison",)
# the LLVM that disassembles what llvm-objdump-19 cannot (a pinned one: the code digest
# depends on its text); tools/test.sh fetches it
DISASSEMBLER = "rocm-7.2.2"


class ToolchainMissing(NotImplementedError):
    """A piece of the toolchain is not installed (asv records the figure as skipped, with
    this message, which says how to get it)."""


class CompileFailed(RuntimeError):
    """The toolchain refused the source (the message carries the end of its output)."""


@dataclass(frozen=True)
class Toolchain:
    name: str
    libllvm: Path | None  # None: the front end's clang compiles straight to a code object
    llvm_version: str
    kit: Path | None = None  # clang22's folder (its front end and linker); None: clang-19's

    def identity(self) -> str:
        """What the code this toolchain makes depends on, for the digests that decide when
        static figures and cold compiles are measured again."""
        front = (self.kit / "toolchain.json").read_text() if self.kit else \
            _tool_version(tool_path("clang"))
        parts = [self.name, self.llvm_version, front, hip_tree_stamp()]
        if self.libllvm is not None:
            stat = self.libllvm.stat()
            parts.append(f"{self.libllvm}:{stat.st_size}:{stat.st_mtime_ns}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def toolchain_root() -> Path:
    """``KPERF_ROCM_ROOT``, else ``.cache/rocm-toolchain`` of the project (kperf.toml), else
    of the user's cache (``~/.cache/kperf``)."""
    explicit = os.environ.get(ROOT_ENV)
    if explicit:
        return Path(explicit)
    from kperf import project

    try:
        return project.find().root / ".cache" / "rocm-toolchain"
    except project.ProjectError:
        return Path.home() / ".cache" / "kperf" / "rocm-toolchain"


def tool_path(tool: str) -> str:
    """``clang``, ``ld.lld``, ``llvm-readelf`` or ``llvm-objdump`` of LLVM 19, from PATH."""
    for name in (f"{tool}-19", tool) if tool != "clang" else ("clang-19",):
        found = shutil.which(name)
        if found:
            return found
    raise ToolchainMissing(f"{tool}-19 is not on PATH: apt-get install clang-19 lld-19 llvm-19 "
                           f"(bash tools/setup_env.sh does, as root)")


def _tool_version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.splitlines()[0] if out.stdout else path


def hip_tree() -> Path:
    tree = toolchain_root() / "hip"
    if not (tree / "tree.json").exists():
        raise ToolchainMissing(f"{tree}: no HIP headers and device libraries; run "
                               f"`kperf toolchain install`")
    return tree


def hip_tree_stamp() -> str:
    return (hip_tree() / "tree.json").read_text()


def disassembler(arch: str) -> Path | None:
    """None where llvm-objdump-19 disassembles ``arch``; else the librocmllvm.so of
    DISASSEMBLER (LLVM 19 has no gfx950)."""
    if arch not in NEEDS_CLANG22:
        return None
    library = toolchain_root() / DISASSEMBLER / "librocmllvm.so"
    if not library.exists():
        raise ToolchainMissing(f"{library}: {arch} code is disassembled by {DISASSEMBLER}'s LLVM "
                               f"(LLVM 19 cannot); run `kperf toolchain fetch {DISASSEMBLER}`")
    return library


def clang22_kit() -> Path:
    """gfx950's front end, compiler and linker (``kperf toolchain fetch clang22``)."""
    kit = toolchain_root() / CLANG22
    if not (kit / "toolchain.json").exists():
        raise ToolchainMissing(f"{kit}: no clang22 (gfx950 needs LLVM 20 or later; LLVM 19 "
                               f"does not know it); run `kperf toolchain fetch clang22`")
    return kit


def toolchain(name: str | None = None, arch: str = "gfx942") -> Toolchain:
    """The named toolchain, else ``$KPERF_ROCM_TOOLCHAIN``, else ``clang19``, as it compiles
    ``arch``: for gfx950, clang19 and llvm19 are clang22, and a ROCm release's LLVM takes
    clang22's IR where it can read it."""
    name = chain_for(name or toolchain_name(), arch)
    if name == CLANG22:
        return Toolchain(CLANG22, None, "22", clang22_kit())
    if arch in NEEDS_CLANG22:
        chain = toolchain(name)
        if int(chain.llvm_version.split(".")[0]) < OLDEST_IR_READER:
            raise ToolchainMissing(
                f"{name} cannot compile {arch} here: its LLVM {chain.llvm_version} cannot read "
                f"the IR of clang 22, the only front end here that knows {arch} (LLVM "
                f"{OLDEST_IR_READER} or later can; docs/amd.md)")
        return replace(chain, kit=clang22_kit())
    if name == "clang19":
        return Toolchain(name, None, "19")
    if name == "llvm19":
        if not DEBIAN_LIBLLVM19.exists():
            raise ToolchainMissing(f"{DEBIAN_LIBLLVM19}: missing; apt-get install llvm-19")
        return Toolchain(name, DEBIAN_LIBLLVM19, "19")
    if name.startswith("rocm-"):
        stamp = toolchain_root() / name / "toolchain.json"
        if not stamp.exists():
            raise ToolchainMissing(f"{name}: not installed under {stamp.parent}; run "
                                   f"`kperf toolchain fetch {name}`")
        info = json.loads(stamp.read_text())
        return Toolchain(name, stamp.parent / "librocmllvm.so", str(info["llvm_version"]))
    raise ToolchainMissing(f"{TOOLCHAIN_ENV}={name!r}: not a toolchain (clang19, llvm19, "
                           f"clang22 or rocm-<version>)")


def chain_for(name: str, arch: str) -> str:
    """The toolchain that compiles ``arch`` when ``name`` is asked for: clang22 for a
    target LLVM 19 does not know, where clang19 or llvm19 is."""
    return CLANG22 if arch in NEEDS_CLANG22 and name in ("clang19", "llvm19") else name


def toolchain_name(arch: str = "gfx942") -> str:
    """The run's toolchain for ``arch``, as its records name it (gfx950's default: clang22)."""
    return chain_for(os.environ.get(TOOLCHAIN_ENV) or DEFAULT_TOOLCHAIN, arch)


def toolchain_identity(arch: str = "gfx942") -> str:
    """The run's toolchain identity, or why there is none (a machine without it still
    computes its digests: its gfx942 TileLang figures are then skipped with that reason)."""
    return _identity(toolchain_name(arch), str(toolchain_root()), arch)


@functools.cache
def _identity(name: str, root: str, arch: str = "gfx942") -> str:
    try:
        return toolchain(name, arch).identity()
    except ToolchainMissing as missing:
        return f"absent: {missing}"


def _front_end_flags(arch: str, include_dirs: list[str], kit: Path | None = None) -> list[str]:
    tree = hip_tree()
    bitcode = (kit or tree) / "bitcode"
    flags = ["-x", "hip", f"--offload-arch={arch}", "--offload-device-only",
             "--no-gpu-bundle-output", "-O3", "-std=c++17", "-mcode-object-version=5",
             f"--rocm-path={tree / 'usr'}", f"--rocm-device-lib-path={bitcode}",
             f"-I{tree / 'usr' / 'include'}", f"-I{tree / 'include'}",
             "-Rpass-analysis=kernel-resource-usage"]
    if kit is not None:
        # clang 22 no longer defines the macro HIP 6.4.3's headers read for warpSize
        flags += [f"-resource-dir={kit / 'resource'}", "-D__AMDGCN_WAVEFRONT_SIZE=64"]
    return flags + [f"-I{d}" for d in include_dirs]


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=CLANG_TIMEOUT_S,
                             env=env)
    except subprocess.TimeoutExpired as err:
        raise CompileFailed(f"{what}: no answer in {CLANG_TIMEOUT_S} s") from err
    if out.returncode != 0:
        raise CompileFailed(f"{what} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return out.stderr


def compile_hip(source: str, arch: str = "gfx942", include_dirs: list[str] | None = None,
                chain: Toolchain | None = None) -> dict[str, object]:
    """HIP source to a code object: ``{"hsaco": ELF bytes, "toolchain": name, "remarks": text}``."""
    chain = chain or toolchain(arch=arch)
    flags = _front_end_flags(arch, list(include_dirs or []), chain.kit)
    with tempfile.TemporaryDirectory(prefix="kperf-hip-") as work:
        src, code_object = Path(work) / "kernel.hip", Path(work) / "kernel.hsaco"
        src.write_text(source)
        if chain.kit is not None:
            remarks = _compile_clang22(chain, flags, Path(work), arch)
        elif chain.libllvm is None:
            remarks = _run([tool_path("clang"), *flags, "-c", str(src), "-o", str(code_object)],
                           f"clang-19 ({chain.name})")
        else:
            bitcode, obj = Path(work) / "kernel.bc", Path(work) / "kernel.o"
            remarks = _run([tool_path("clang"), *flags, "-emit-llvm", "-Xclang",
                            "-disable-llvm-passes", "-c", str(src), "-o", str(bitcode)],
                           "clang-19 front end")
            _run([sys.executable, str(BACKEND), str(chain.libllvm), str(bitcode), str(obj),
                  "--mcpu", arch], f"{chain.name} back end")
            _run([tool_path("ld.lld"), "-m", "elf64_amdgpu", "--no-undefined", "-shared",
                  "-o", str(code_object), str(obj)], "ld.lld-19")
        return {"hsaco": code_object.read_bytes(), "toolchain": chain.name, "remarks": remarks}


def _compile_clang22(chain: Toolchain, flags: list[str], work: Path, arch: str) -> str:
    """clang22's compile of ``work/kernel.hip`` to ``work/kernel.hsaco``: one process (its
    driver calls its linker ``lld``, which is ``zig ld.lld`` here), or its IR through a
    ROCm release's LLVM."""
    zig = str(chain.kit / "zig")
    src, code_object = work / "kernel.hip", work / "kernel.hsaco"
    if chain.libllvm is None:
        linker = work / "bin" / "lld"
        linker.parent.mkdir()
        linker.write_text(f'#!/bin/sh\nshift 2\nexec "{zig}" ld.lld "$@"\n')  # "-flavor gnu"
        linker.chmod(0o755)
        env = {**os.environ, "PATH": f"{linker.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return _run([zig, "clang", *flags, "-c", str(src), "-o", str(code_object)],
                    "clang22", env)
    ir, obj = work / "kernel.ll", work / "kernel.o"
    remarks = _run([zig, "clang", *flags, "-S", "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                    str(src), "-o", str(ir)], "clang22 front end")
    text = ir.read_text()
    for attribute in NEWER_IR_ATTRIBUTES:
        text = text.replace(f" {attribute}", "")
    ir.write_text(text)
    _run([sys.executable, str(BACKEND), str(chain.libllvm), str(ir), str(obj),
          "--mcpu", arch], f"{chain.name} back end")
    _run([zig, "ld.lld", "-m", "elf64_amdgpu", "--no-undefined", "-shared", "-o",
          str(code_object), str(obj)], "clang22's ld.lld")
    return remarks


def with_code_object(artifacts: dict[str, object], vendor: str, arch: str,
                     chain: Toolchain | None = None) -> dict[str, object]:
    """A backend's ahead-of-time artifacts down to a device binary: device source for AMD
    that ends before one (TileLang's HIP path) is compiled here, as hipcc would, by
    ``chain`` (default: the run's toolchain)."""
    if vendor != "amd" or "hsaco" in artifacts or "source" not in artifacts:
        return artifacts
    include_dirs = [str(d) for d in artifacts.get("include_dirs") or []]
    return artifacts | compile_hip(str(artifacts["source"]), arch, include_dirs, chain)
