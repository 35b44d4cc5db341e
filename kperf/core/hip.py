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
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TOOLCHAIN = "clang19"
TOOLCHAIN_ENV = "KPERF_ROCM_TOOLCHAIN"
ROOT_ENV = "KPERF_ROCM_ROOT"
CLANG_TIMEOUT_S = 300
BACKEND = Path(__file__).with_name("amdgpu_backend.py")
DEBIAN_LIBLLVM19 = Path("/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1")


class ToolchainMissing(NotImplementedError):
    """A piece of the toolchain is not installed (asv records the figure as skipped, with
    this message, which says how to get it)."""


class CompileFailed(RuntimeError):
    """The toolchain refused the source (the message carries the end of its output)."""


@dataclass(frozen=True)
class Toolchain:
    name: str
    libllvm: Path | None  # None: clang-19 compiles straight to a code object
    llvm_version: str

    def identity(self) -> str:
        """What the code this toolchain makes depends on, for the digests that decide when
        static figures and cold compiles are measured again."""
        parts = [self.name, self.llvm_version, _tool_version(tool_path("clang")),
                 hip_tree_stamp()]
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


def toolchain(name: str | None = None) -> Toolchain:
    """The named toolchain, else ``$KPERF_ROCM_TOOLCHAIN``, else ``clang19``."""
    name = name or toolchain_name()
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
    raise ToolchainMissing(f"{TOOLCHAIN_ENV}={name!r}: not a toolchain (clang19, llvm19 or "
                           f"rocm-<version>)")


def toolchain_name() -> str:
    return os.environ.get(TOOLCHAIN_ENV) or DEFAULT_TOOLCHAIN


def toolchain_identity() -> str:
    """The run's toolchain identity, or why there is none (a machine without it still
    computes its digests: its gfx942 TileLang figures are then skipped with that reason)."""
    return _identity(toolchain_name(), str(toolchain_root()))


@functools.cache
def _identity(name: str, root: str) -> str:
    try:
        return toolchain(name).identity()
    except ToolchainMissing as missing:
        return f"absent: {missing}"


def _front_end_flags(arch: str, include_dirs: list[str]) -> list[str]:
    tree = hip_tree()
    flags = ["-x", "hip", f"--offload-arch={arch}", "--offload-device-only",
             "--no-gpu-bundle-output", "-O3", "-std=c++17", "-mcode-object-version=5",
             f"--rocm-path={tree / 'usr'}", f"--rocm-device-lib-path={tree / 'bitcode'}",
             f"-I{tree / 'usr' / 'include'}", f"-I{tree / 'include'}",
             "-Rpass-analysis=kernel-resource-usage"]
    return flags + [f"-I{d}" for d in include_dirs]


def _run(cmd: list[str], what: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=CLANG_TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        raise CompileFailed(f"{what}: no answer in {CLANG_TIMEOUT_S} s") from err
    if out.returncode != 0:
        raise CompileFailed(f"{what} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return out.stderr


def compile_hip(source: str, arch: str = "gfx942", include_dirs: list[str] | None = None,
                chain: Toolchain | None = None) -> dict[str, object]:
    """HIP source to a code object: ``{"hsaco": ELF bytes, "toolchain": name, "remarks": text}``."""
    chain = chain or toolchain()
    flags = _front_end_flags(arch, list(include_dirs or []))
    with tempfile.TemporaryDirectory(prefix="kperf-hip-") as work:
        src, code_object = Path(work) / "kernel.hip", Path(work) / "kernel.hsaco"
        src.write_text(source)
        if chain.libllvm is None:
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


def with_code_object(artifacts: dict[str, object], vendor: str, arch: str,
                     chain: Toolchain | None = None) -> dict[str, object]:
    """A backend's ahead-of-time artifacts down to a device binary: device source for AMD
    that ends before one (TileLang's HIP path) is compiled here, as hipcc would, by
    ``chain`` (default: the run's toolchain)."""
    if vendor != "amd" or "hsaco" in artifacts or "source" not in artifacts:
        return artifacts
    include_dirs = [str(d) for d in artifacts.get("include_dirs") or []]
    return artifacts | compile_hip(str(artifacts["source"]), arch, include_dirs, chain)
