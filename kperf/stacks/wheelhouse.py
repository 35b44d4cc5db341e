"""Wheelhouse for an air-gapped GPU runner: download for its platform, carry it in parts.

    python -m kperf.stacks.wheelhouse build --platform manylinux_2_28_x86_64 \\
        --python-version 3.12 \\
        --out wh/ --part-size 60MiB triton==3.3.1 tilelang==0.1.15 apache-tvm-ffi==0.1.12
    python -m kperf.stacks.wheelhouse split --wheels dl/ --out wh/ --part-size 60MiB
    python -m kperf.stacks.wheelhouse restore --parts wh/ --dest /opt/wheels     # on the runner

``build`` runs ``pip download --only-binary=:all: --platform ... --python-version ...
--implementation cp`` (wheels only: nothing is built for the wrong machine), then
``split`` packs the wheels into tar parts of at most the given size, first-fit by size,
with ``manifest.json`` (sha256 of every wheel and part, which part holds which wheel). A
wheel larger than a part (Triton is ~250 MB) is cut into chunks, one part each, and
joined again by ``restore``, which checks every sha256. Then point pip (and so asv's
environments) at the folder: ``PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/wheels``, as
tools/offline_env.sh does (docs/stacks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kperf.config import ConfigError, load_json
from kperf.paths import SCRATCH_MARKER, PathError, inside, sha256_of

MANIFEST_SCHEMA = "kperf-wheelhouse-1"
BLOCK = 512
# tarfile pads an archive to a multiple of its record size (20 blocks) after two zero blocks
RECORD = 20 * BLOCK
ARCHIVE_OVERHEAD = 2 * BLOCK + RECORD
# one header block, plus a PAX header (2+ blocks) for names longer than 100 characters
MEMBER_OVERHEAD = 4 * BLOCK
CHUNK_SUFFIX = ".chunk"


class WheelhouseError(Exception):
    """Bad input or a failed step; the message names the file or option."""


# --------------------------------------------------------------------------- download


def pip_download_command(requirements: Sequence[str], dest: Path, platforms: Sequence[str],
                         python_version: str, implementation: str = "cp",
                         abi: str | None = None, python: str = sys.executable,
                         no_deps: bool = False) -> list[str]:
    """The ``pip download`` that fetches wheels for another platform and interpreter."""
    if not requirements:
        raise WheelhouseError("no requirements given (positional or -r FILE)")
    if not platforms:
        raise WheelhouseError("--platform is required, e.g. manylinux_2_28_x86_64")
    if not re.fullmatch(r"\d+(\.\d+)?", python_version):
        raise WheelhouseError(f"--python-version {python_version!r}: expected e.g. 3.12")
    cmd = [python, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest)]
    for platform in platforms:
        cmd += ["--platform", platform]
    cmd += ["--python-version", python_version, "--implementation", implementation]
    if abi:
        cmd += ["--abi", abi]
    if no_deps:  # e.g. TileLang on an image that has torch: its deps are listed by hand
        cmd.append("--no-deps")
    return cmd + list(requirements)


def read_requirements(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError as err:
        raise WheelhouseError(f"{path}: requirements file not found") from err
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


# --------------------------------------------------------------------------- splitting


def member_cost(size: int) -> int:
    return MEMBER_OVERHEAD + -(-size // BLOCK) * BLOCK


@dataclass
class Part:
    name: str
    members: list[Path] = field(default_factory=list)
    cost: int = ARCHIVE_OVERHEAD


def parse_size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*", text)
    if not match:
        raise WheelhouseError(f"--part-size {text!r}: expected e.g. 60MiB, 500MB or 1048576")
    scale = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
             "KB": 10**3, "MB": 10**6, "GB": 10**9}[match.group(2)]
    return int(match.group(1)) * scale


def cut_chunks(wheel: Path, chunk_bytes: int, work: Path) -> list[Path]:
    """Cut an oversize wheel into files of at most ``chunk_bytes``: name.whl.chunk000, ..."""
    chunks = []
    with wheel.open("rb") as f:
        for index, data in enumerate(iter(lambda: f.read(chunk_bytes), b"")):
            chunk = work / f"{wheel.name}{CHUNK_SUFFIX}{index:03d}"
            chunk.write_bytes(data)
            chunks.append(chunk)
    return chunks


def plan_parts(files: Sequence[Path], max_bytes: int) -> list[Part]:
    """First-fit decreasing: the largest file first, into the first part it fits."""
    parts: list[Part] = []
    for path in sorted(files, key=lambda p: (-p.stat().st_size, p.name)):
        cost = member_cost(path.stat().st_size)
        home = next((p for p in parts if p.cost + cost <= max_bytes), None)
        if home is None:
            home = Part(f"part-{len(parts) + 1:03d}.tar")
            parts.append(home)
        home.members.append(path)
        home.cost += cost
    return parts


def write_part(part: Part, out_dir: Path, max_bytes: int) -> dict[str, Any]:
    path = out_dir / part.name
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for member in part.members:
            tar.add(member, arcname=member.name, recursive=False)
    size = path.stat().st_size
    if size > max_bytes:  # the cost model is conservative; this guards it
        raise WheelhouseError(f"{path}: {size} bytes exceeds the part size {max_bytes}")
    return {"name": part.name, "bytes": size, "sha256": sha256_of(path),
            "members": [m.name for m in part.members]}


def split(wheel_dir: Path, out_dir: Path, max_bytes: int) -> dict[str, Any]:
    """Pack every wheel of ``wheel_dir`` into tar parts under ``out_dir`` + manifest.json."""
    wheels = sorted(wheel_dir.glob("*.whl"))
    if not wheels:
        raise WheelhouseError(f"{wheel_dir}: no .whl files to pack")
    chunk_bytes = max_bytes - ARCHIVE_OVERHEAD - MEMBER_OVERHEAD
    if chunk_bytes < BLOCK:
        raise WheelhouseError(f"--part-size {max_bytes} bytes is too small for a tar part "
                              f"(at least {ARCHIVE_OVERHEAD + MEMBER_OVERHEAD + BLOCK})")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="kperf-wheelhouse-") as tmp:
        members: list[Path] = []
        for wheel in wheels:
            entries[wheel.name] = {"name": wheel.name, "bytes": wheel.stat().st_size,
                                   "sha256": sha256_of(wheel), "chunks": []}
            if member_cost(wheel.stat().st_size) + ARCHIVE_OVERHEAD <= max_bytes:
                members.append(wheel)
                continue
            chunks = cut_chunks(wheel, chunk_bytes, Path(tmp))
            entries[wheel.name]["chunks"] = [c.name for c in chunks]
            members += chunks
        parts = [write_part(p, out_dir, max_bytes) for p in plan_parts(members, max_bytes)]
    where = {m: p["name"] for p in parts for m in p["members"]}
    for entry in entries.values():
        names = entry["chunks"] or [entry["name"]]
        entry["parts"] = sorted({where[n] for n in names})
    manifest = {"schema": MANIFEST_SCHEMA, "part_size": max_bytes, "parts": parts,
                "wheels": sorted(entries.values(), key=lambda e: e["name"])}
    _write_atomic(out_dir / "manifest.json", json.dumps(manifest, indent=1))
    return manifest


def _write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (a full disk, a kill)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- restoring


def load_manifest(parts_dir: Path) -> dict[str, Any]:
    """manifest.json, checked against kperf/schemas/wheelhouse-manifest.json (every name a
    plain file name, every digest 64 hex digits) and for consistency: each wheel's files
    are members of the parts listed."""
    path = parts_dir / "manifest.json"
    try:
        manifest = load_json(path, "wheelhouse-manifest")
    except ConfigError as err:
        raise WheelhouseError(str(err)) from err
    members = {m for part in manifest["parts"] for m in part["members"]}
    seen: set[str] = set()
    for index, wheel in enumerate(manifest["wheels"]):
        where = f"{path}: field /wheels/{index}"
        if wheel["name"] in seen:
            raise WheelhouseError(f"{where}/name: {wheel['name']!r} is listed twice")
        seen.add(wheel["name"])
        for k, name in enumerate(wheel["chunks"] or [wheel["name"]]):
            if name not in members:
                field_name = f"chunks/{k}" if wheel["chunks"] else "name"
                raise WheelhouseError(f"{where}/{field_name}: {name!r} is in no part's members")
    return manifest


STAGING_PREFIX = ".kperf-wheelhouse-staging-"


def _clear_stale_staging(dest: Path) -> None:
    """Staging folders of a restore that was killed (SIGKILL, power loss): ours by name
    and marker, and never holding a finished wheel (those are moved out when checked)."""
    for stale in dest.glob(STAGING_PREFIX + "*"):
        if stale.is_dir() and not stale.is_symlink() and (
                (stale / SCRATCH_MARKER).is_file() or not any(stale.iterdir())):
            shutil.rmtree(stale, ignore_errors=True)


def restore(parts_dir: Path, dest: Path) -> list[Path]:
    """Check and unpack every part, join chunked wheels, check every wheel's sha256.

    A wheel reaches ``dest`` only whole and checked: it is assembled in a staging folder
    inside ``dest`` and renamed into place after its sha256 matched, so an interrupted or
    failed restore never leaves a partial or wrong wheel where pip would find it.
    """
    manifest = load_manifest(parts_dir)
    mpath = parts_dir / "manifest.json"
    dest.mkdir(parents=True, exist_ok=True)
    _clear_stale_staging(dest)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=dest))
    try:
        try:
            (staging / SCRATCH_MARKER).write_text("kperf.stacks.wheelhouse restore staging\n")
        except OSError as err:
            raise WheelhouseError(f"{dest}: cannot write ({err.strerror or err})") from err
        unpacked = staging / "parts"
        joined = staging / "wheels"
        unpacked.mkdir()
        joined.mkdir()
        for index, part in enumerate(manifest["parts"]):
            path = inside(parts_dir, part["name"], what="part name",
                          source=f"{mpath}: field /parts/{index}/name")
            if not path.is_file():
                raise WheelhouseError(f"{path}: part missing (listed in {mpath} "
                                      f"/parts/{index})")
            if sha256_of(path) != part["sha256"]:
                raise WheelhouseError(f"{path}: sha256 differs from manifest.json (corrupt copy)")
            try:
                with tarfile.open(path) as tar:
                    tar.extractall(unpacked, filter="data")
            except (tarfile.TarError, EOFError) as err:
                raise WheelhouseError(f"{path}: not a readable tar part ({err})") from err
            except OSError as err:  # a full disk while unpacking
                raise WheelhouseError(f"{path}: cannot unpack into {dest} "
                                      f"({err.strerror or err}); nothing partial was left "
                                      f"there") from err
        out = []
        for index, wheel in enumerate(manifest["wheels"]):
            target = dest / wheel["name"]
            assembled = joined / wheel["name"]
            try:
                with assembled.open("wb") as sink:
                    for k, name in enumerate(wheel["chunks"] or [wheel["name"]]):
                        piece = unpacked / name
                        if not piece.is_file():
                            raise WheelhouseError(
                                f"{mpath}: field /wheels/{index}/"
                                f"{f'chunks/{k}' if wheel['chunks'] else 'name'}: {name!r} "
                                f"is not in the parts that were unpacked")
                        with piece.open("rb") as src:
                            shutil.copyfileobj(src, sink)
                        piece.unlink()  # frees the space as the wheel grows
            except OSError as err:
                raise WheelhouseError(f"{target}: cannot write ({err.strerror or err}); "
                                      f"nothing partial was left in {dest}") from err
            if sha256_of(assembled) != wheel["sha256"]:
                raise WheelhouseError(f"{target}: sha256 differs from {mpath} "
                                      f"/wheels/{index}/sha256; not restored")
            os.replace(assembled, target)
            out.append(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kperf.stacks.wheelhouse",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__[__doc__.index("    python -m"):])
    sub = parser.add_subparsers(dest="cmd", required=True)
    build = sub.add_parser("build", help="pip download for a platform, then split")
    build.add_argument("requirements", nargs="*", help="requirement specifiers")
    build.add_argument("-r", "--requirement", type=Path, action="append", default=[],
                       help="requirements file (repeatable)")
    build.add_argument("--platform", action="append", default=[],
                       help="wheel platform tag, repeatable (e.g. manylinux_2_28_x86_64)")
    build.add_argument("--python-version", required=True, help="target Python, e.g. 3.12")
    build.add_argument("--implementation", default="cp")
    build.add_argument("--abi", help="e.g. cp312 (default: pip's choice for the version)")
    build.add_argument("--no-deps", action="store_true",
                       help="only the named wheels (the runner already has the rest, e.g. torch)")
    build.add_argument("--download-dir", type=Path,
                       help="keep the wheels here (default: temp); a second build into the "
                            "same folder adds to it and packs everything")
    build.add_argument("--dry-run", action="store_true", help="print the pip command only")
    for p in (build, sub.add_parser("split", help="pack a folder of wheels into parts")):
        p.add_argument("--out", type=Path, required=True, help="folder for parts + manifest")
        p.add_argument("--part-size", default="60MiB", help="largest part (default 60MiB)")
    sub.choices["split"].add_argument("--wheels", type=Path, required=True)
    rest = sub.add_parser("restore", help="check parts and unpack the wheels")
    rest.add_argument("--parts", type=Path, required=True, help="folder with manifest.json")
    rest.add_argument("--dest", type=Path, required=True, help="wheel folder for PIP_FIND_LINKS")
    return parser


def _build(args: argparse.Namespace) -> int:
    requirements = list(args.requirements)
    for path in args.requirement:
        requirements += read_requirements(path)
    max_bytes = parse_size(args.part_size)
    with tempfile.TemporaryDirectory(prefix="kperf-wheels-") as tmp:
        dest = args.download_dir or Path(tmp)
        cmd = pip_download_command(requirements, dest, args.platform, args.python_version,
                                   args.implementation, args.abi, no_deps=args.no_deps)
        print("+ " + " ".join(cmd), flush=True)
        if args.dry_run:
            return 0
        if subprocess.run(cmd).returncode != 0:
            raise WheelhouseError("pip download failed (see above); nothing was packed")
        manifest = split(dest, args.out, max_bytes)
    _print_summary(manifest, args.out)
    return 0


def _print_summary(manifest: dict[str, Any], out: Path) -> None:
    total = sum(p["bytes"] for p in manifest["parts"])
    print(f"wheelhouse: {len(manifest['wheels'])} wheels in {len(manifest['parts'])} parts "
          f"({total / 2**20:.1f} MiB) under {out}; restore with "
          f"python -m kperf.stacks.wheelhouse restore --parts {out} --dest WHEELDIR")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "build":
            return _build(args)
        if args.cmd == "split":
            manifest = split(args.wheels, args.out, parse_size(args.part_size))
            _print_summary(manifest, args.out)
            return 0
        restored = restore(args.parts, args.dest)
        print(f"wheelhouse: {len(restored)} wheels in {args.dest}; point pip at them with\n"
              f"  export PIP_NO_INDEX=1 PIP_FIND_LINKS={args.dest.resolve()}")
        return 0
    except (WheelhouseError, PathError) as err:
        print(f"wheelhouse: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
