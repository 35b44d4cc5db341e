"""Optimise and code-generate AMDGPU bitcode with a given LLVM shared library (LLVM-C API).

    python amdgpu_backend.py LIBLLVM IN.bc OUT.o [--mcpu gfx942]

Run as its own process by ``kperf.core.hip``: each toolchain's LLVM (Debian's libLLVM-19,
the librocmllvm.so of a ROCm release) is loaded alone, an LLVM fatal error fails one
compile and not the caller, and the script needs nothing beyond the standard library.

The bitcode comes from clang's HIP front end with its LLVM passes disabled, so what this
does is what ``clang -c`` does after its front end: the ``default<O3>`` pipeline with the
target's own pass callbacks, then the back end to an ELF object, with the two options the
clang driver gives the device compile of a non-relocatable HIP program
(``-amdgpu-internalize-symbols``: only kernels stay external, every other function may be
inlined away, as in hipcc's output).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

TRIPLE = b"amdgcn-amd-amdhsa"
CODEGEN_O3, RELOC_PIC, CODE_MODEL_DEFAULT, OBJECT_FILE = 3, 2, 0, 1
DRIVER_OPTIONS = (b"-amdgpu-internalize-symbols", b"--amdhsa-code-object-version=5")

ptr = ctypes.c_void_p
text = ctypes.c_char_p


class BackendError(RuntimeError):
    pass


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    signatures = {
        "LLVMParseCommandLineOptions": (None, [ctypes.c_int, ctypes.POINTER(text), text]),
        "LLVMContextCreate": (ptr, []),
        "LLVMCreateMemoryBufferWithContentsOfFile":
            (ctypes.c_int, [text, ctypes.POINTER(ptr), ctypes.POINTER(text)]),
        "LLVMParseBitcodeInContext2": (ctypes.c_int, [ptr, ptr, ctypes.POINTER(ptr)]),
        "LLVMParseIRInContext":
            (ctypes.c_int, [ptr, ptr, ctypes.POINTER(ptr), ctypes.POINTER(text)]),
        "LLVMGetTargetFromTriple":
            (ctypes.c_int, [text, ctypes.POINTER(ptr), ctypes.POINTER(text)]),
        "LLVMCreateTargetMachine":
            (ptr, [ptr, text, text, text, ctypes.c_int, ctypes.c_int, ctypes.c_int]),
        "LLVMCreatePassBuilderOptions": (ptr, []),
        "LLVMRunPasses": (ptr, [ptr, text, ptr, ptr]),
        "LLVMGetErrorMessage": (ctypes.c_void_p, [ptr]),
        "LLVMTargetMachineEmitToMemoryBuffer":
            (ctypes.c_int, [ptr, ptr, ctypes.c_int, ctypes.POINTER(text), ctypes.POINTER(ptr)]),
        "LLVMGetBufferStart": (ptr, [ptr]),
        "LLVMGetBufferSize": (ctypes.c_size_t, [ptr]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _initialise_amdgpu(lib: ctypes.CDLL) -> None:
    """The AMDGPU target's parts; a library built with every target may export only the
    ``LLVMInitializeAll*`` wrappers (ROCm's), Debian's exports the per-target ones."""
    for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"):
        try:
            getattr(lib, f"LLVMInitializeAMDGPU{part}")()
        except AttributeError:
            getattr(lib, f"LLVMInitializeAll{part}s")()


def compile_bitcode(lib_path: Path, bitcode: Path, out: Path, mcpu: str) -> None:
    lib = _bind(ctypes.CDLL(str(lib_path)))
    argv = (text * (len(DRIVER_OPTIONS) + 1))(b"kperf", *DRIVER_OPTIONS)
    lib.LLVMParseCommandLineOptions(len(argv), argv, None)
    _initialise_amdgpu(lib)
    message = text()
    buffer, module, target = ptr(), ptr(), ptr()
    if lib.LLVMCreateMemoryBufferWithContentsOfFile(str(bitcode).encode(), ctypes.byref(buffer),
                                                    ctypes.byref(message)):
        raise BackendError(f"{bitcode}: {message.value!r}")
    if bitcode.suffix == ".ll":  # textual IR of a newer front end (kperf.core.hip)
        if lib.LLVMParseIRInContext(lib.LLVMContextCreate(), buffer, ctypes.byref(module),
                                    ctypes.byref(message)):
            raise BackendError(f"{bitcode}: this LLVM cannot parse the IR: "
                               f"{message.value.decode(errors='replace')[:2000]}")
    elif lib.LLVMParseBitcodeInContext2(lib.LLVMContextCreate(), buffer, ctypes.byref(module)):
        raise BackendError(f"{bitcode}: this LLVM cannot read the bitcode (older than its writer?)")
    if lib.LLVMGetTargetFromTriple(TRIPLE, ctypes.byref(target), ctypes.byref(message)):
        raise BackendError(f"{lib_path}: no AMDGPU target ({message.value!r})")
    machine = lib.LLVMCreateTargetMachine(target, TRIPLE, mcpu.encode(), b"", CODEGEN_O3,
                                          RELOC_PIC, CODE_MODEL_DEFAULT)
    error = lib.LLVMRunPasses(module, b"default<O3>", machine, lib.LLVMCreatePassBuilderOptions())
    if error:
        raise BackendError(f"default<O3>: {ctypes.string_at(lib.LLVMGetErrorMessage(error))!r}")
    emitted = ptr()
    if lib.LLVMTargetMachineEmitToMemoryBuffer(machine, module, OBJECT_FILE, ctypes.byref(message),
                                               ctypes.byref(emitted)):
        raise BackendError(f"code generation: {message.value!r}")
    out.write_bytes(ctypes.string_at(lib.LLVMGetBufferStart(emitted),
                                      lib.LLVMGetBufferSize(emitted)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libllvm", type=Path)
    parser.add_argument("bitcode", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--mcpu", default="gfx942")
    args = parser.parse_args(argv)
    try:
        compile_bitcode(args.libllvm, args.bitcode, args.out, args.mcpu)
    except (BackendError, OSError) as err:
        print(f"amdgpu_backend: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
