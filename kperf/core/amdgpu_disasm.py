"""Disassemble an AMDGPU code object with a given LLVM shared library (LLVM-C API).

    python amdgpu_disasm.py LIBLLVM CODE_OBJECT --mcpu gfx950

Prints ``.text`` as ``llvm-objdump -d --no-show-raw-insn`` does: a ``<name>:`` line where
each function symbol starts, one tab-indented line per instruction (the padding after the
last function included, as llvm-objdump prints it; tested against llvm-objdump-19 on
gfx942). Debian's llvm-objdump-19 does not know gfx950 (it stops, "Disassembly not yet
supported for subtarget", and read as gfx942 every gfx950-only instruction, the MFMAs
among them, is an unknown word); a ROCm release's LLVM does. Run as its own process by
``kperf.core.codeobj`` for the reasons ``amdgpu_backend.py`` is: one LLVM loaded alone,
nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import struct
import sys
from pathlib import Path

TRIPLE = b"amdgcn-amd-amdhsa"
STT_FUNC = 2


class DisasmError(RuntimeError):
    pass


def _sections(elf: bytes) -> dict[str, tuple[int, int, int, int]]:
    """{name: (file offset, size, address, link)} of an ELF64 little-endian file."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise DisasmError("not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]

    def name(at: int) -> str:
        end = elf.index(b"\0", names_offset + at)
        return elf[names_offset + at:end].decode()

    return {name(h[0]): (h[4], h[5], h[3], h[6]) for h in headers}


def text_and_functions(elf: bytes) -> tuple[tuple[int, int], dict[int, str]]:
    """((file offset, size) of ``.text``, {file offset: name} of its function symbols)."""
    sections = _sections(elf)
    if ".symtab" not in sections or ".text" not in sections:
        raise DisasmError("no .symtab or .text section")
    sym_offset, sym_size, _, strtab_index = sections[".symtab"]
    strtab = list(sections.values())[strtab_index][0]
    text_offset, text_size, text_address, _ = sections[".text"]
    starts = {}
    for at in range(sym_offset, sym_offset + sym_size, 24):
        st_name, st_info, _, _, st_value, st_size = struct.unpack_from("<IBBHQQ", elf, at)
        if st_info & 0xF == STT_FUNC and st_size:
            end = elf.index(b"\0", strtab + st_name)
            starts[text_offset + st_value - text_address] = elf[strtab + st_name:end].decode()
    return (text_offset, text_size), starts


def disassemble(lib_path: Path, code_object: Path, mcpu: str) -> str:
    lib = ctypes.CDLL(str(lib_path))
    for part in ("TargetInfo", "TargetMC", "Disassembler"):
        try:
            getattr(lib, f"LLVMInitializeAMDGPU{part}")()
        except AttributeError:
            getattr(lib, f"LLVMInitializeAll{part}s")()
    lib.LLVMCreateDisasmCPU.restype = ctypes.c_void_p
    lib.LLVMCreateDisasmCPU.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                                        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.LLVMDisasmInstruction.restype = ctypes.c_size_t
    lib.LLVMDisasmInstruction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                          ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
    context = lib.LLVMCreateDisasmCPU(TRIPLE, mcpu.encode(), None, 0, None, None)
    if not context:
        raise DisasmError(f"{lib_path}: no AMDGPU disassembler for {mcpu}")
    elf = code_object.read_bytes()
    buffer = ctypes.create_string_buffer(elf)
    text = ctypes.create_string_buffer(512)
    lines = []
    (offset, size), starts = text_and_functions(elf)
    at = offset
    while at < offset + size:
        if at in starts:
            lines.append(f"\n<{starts[at]}>:")
        used = lib.LLVMDisasmInstruction(context, ctypes.addressof(buffer) + at,
                                         offset + size - at, at - offset, text, len(text))
        if not used:  # an undecodable word: as llvm-objdump prints it
            lines.append(f"\t.long 0x{struct.unpack_from('<I', elf, at)[0]:08x}")
            used = 4
        else:
            lines.append("\t" + text.value.decode().strip())
        at += used
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libllvm", type=Path)
    parser.add_argument("code_object", type=Path)
    parser.add_argument("--mcpu", required=True)
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(disassemble(args.libllvm, args.code_object, args.mcpu))
    except (DisasmError, OSError, ValueError, struct.error) as err:
        print(f"amdgpu_disasm: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
