"""Keep the per-sample records with the results: pack a run's records, store, unpack.

    kperf records pack --records .asv/records --machine ci-sm_90 \\
        --out nightly-out/records/ci-sm_90/2026-12-01-1234.tar.xz
    kperf records store --incoming artifacts/ --into perf-results/
    kperf records unpack --archives perf-results/records \\
        --dest .asv/records
    kperf records check ARCHIVE...

The nightly workflow measures on a GPU runner that holds no write token; the records it
wrote (``.asv/records/<machine>/...``, one small JSON per benchmark process: clocks, power,
throttle bits per sample) are packed into one xz-compressed tar per machine and night, and
a GitHub-hosted job ``store``s them with the results on the ``perf-results`` branch:
``results/<machine>/*.json`` (asv's) and ``records/<machine>/<night>.tar.xz`` (and the CPU
codegen runner's ``codegen-records/`` and ``compile-records/`` alike). The publish job
``unpack``s every archive into ``.asv/records`` (and its siblings) for the site's pages.

Every name is checked (one plain name per path component, regular files only, no link,
no absolute or ``..`` member), archives are written atomically, an existing archive is
never overwritten with other content, and a truncated or corrupt archive is an error that
names it (``unpack --keep-going`` skips it with a warning and unpacks the rest).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kperf.config import ConfigError, parse_json, validate
from kperf.paths import PathError, inside, safe_name

ARCHIVE_SUFFIX = ".tar.xz"
# What a night keeps: the measurements' records, and beside them the code's figures and the
# cold compiles (the CPU codegen runner's, kperf/suites/static.py); each folder its own
# archives, unpacked into its own folder beside ``.asv/records``.
RECORD_FOLDERS = ("records", "codegen-records", "compile-records")


class ArchiveError(Exception):
    """A record archive or an incoming artifact that cannot be used; the message names it."""


def _atomic_tar(out: Path, members: Sequence[tuple[Path, str]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:xz", format=tarfile.PAX_FORMAT) as tar:
            for path, arcname in members:
                tar.add(path, arcname=arcname, recursive=False)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def pack(records_root: Path, machine: str, out: Path, since: float = 0.0) -> int:
    """Every file under ``records_root/<machine>`` (written at or after ``since``: a night
    that began from earlier nights' records packs its own) into ``out`` (tar.xz, names relative to
    ``records_root``); returns how many. Written atomically: a full disk or a kill leaves
    no archive, never a truncated one."""
    base = inside(records_root, safe_name(machine, "--machine"), what="machine")
    if not base.is_dir():
        raise ArchiveError(f"{base}: no records for machine {machine!r}")
    members = []
    for path in sorted(base.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise ArchiveError(f"{path}: not a regular file; records are plain JSON files")
        if path.is_file() and path.stat().st_mtime >= since:  # since: a night's own only
            members.append((path, path.relative_to(records_root).as_posix()))
    if not members:
        raise ArchiveError(f"{base}: no record files to pack")
    try:
        _atomic_tar(out, members)
    except OSError as err:
        raise ArchiveError(f"{out}: cannot write ({err.strerror or err}); no archive was "
                           f"left") from err
    return len(members)


def _checked_members(archive: Path, machine: str | None) -> list[tarfile.TarInfo]:
    """The archive's members, all regular files under plain names (``machine`` first)."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError) as err:  # lzma errors are OSError / EOFError
        raise ArchiveError(f"{archive}: not a readable archive, truncated or corrupt "
                           f"({err})") from err
    for member in members:
        parts = member.name.split("/")
        if not member.isfile():
            raise ArchiveError(f"{archive}: member {member.name!r} is not a regular file")
        try:
            for part in parts:
                safe_name(part, "member path component", archive)
        except PathError as err:
            raise ArchiveError(str(err)) from err
        if machine is not None and parts[0] != machine:
            raise ArchiveError(f"{archive}: member {member.name!r} is not under {machine}/, "
                               f"the machine folder the archive is stored in")
    return members


def check(archive: Path) -> list[str]:
    """Problems of an archive's records (each member parsed and checked against
    kperf/schemas/record.json); raises ``ArchiveError`` if the archive is unreadable."""
    problems = []
    _checked_members(archive, None)
    with tarfile.open(archive, "r:*") as tar:
        for member in tar.getmembers():
            source = f"{archive}:{member.name}"
            try:
                data = tar.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
                validate(parse_json(data, source), "record", source)
            except (tarfile.TarError, EOFError, OSError) as err:
                raise ArchiveError(f"{archive}: truncated or corrupt at {member.name} "
                                   f"({err})") from err
            except UnicodeDecodeError:
                problems.append(f"{source}: not UTF-8 text")
            except ConfigError as err:
                problems.append(str(err))
    return problems


def unpack(archives: Path, dest: Path, keep_going: bool = False) -> tuple[int, list[str]]:
    """Every ``<machine>/*.tar.xz`` under ``archives`` into ``dest``; (files, problems).

    An archive is extracted into a staging folder first and moved in only when whole, so
    a corrupt one adds nothing. A record already in ``dest`` with other content is an
    error (records are never overwritten)."""
    count, problems = 0, []
    dest.mkdir(parents=True, exist_ok=True)
    for archive in sorted(archives.glob(f"*/*{ARCHIVE_SUFFIX}")):
        try:
            count += _unpack_one(archive, dest)
            problems += check(archive)
        except ArchiveError as err:
            if not keep_going:
                raise
            problems.append(f"skipped: {err}")
    return count, problems


def _unpack_one(archive: Path, dest: Path) -> int:
    members = _checked_members(archive, safe_name(archive.parent.name, "machine folder"))
    with tempfile.TemporaryDirectory(prefix=".kperf-unpack-", dir=dest) as tmp:
        try:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(tmp, members=members, filter="data")
        except (tarfile.TarError, EOFError, OSError) as err:
            raise ArchiveError(f"{archive}: truncated or corrupt ({err}); nothing of it "
                               f"was unpacked") from err
        for member in members:
            src, target = Path(tmp) / member.name, dest / member.name
            if target.exists():
                if _digest(target) != _digest(src):
                    raise ArchiveError(f"{archive}: {member.name} differs from {target}; "
                                       f"records are never overwritten")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, target)
    return len(members)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store(incoming: Path, into: Path) -> list[str]:
    """Merge nightly artifacts (``<artifact>/results/...``, ``<artifact>/records/...``) into
    the results branch's work tree; returns the paths added or replaced."""
    changed = []
    for artifact in sorted(p for p in incoming.iterdir() if p.is_dir()):
        for path in sorted(artifact.rglob("*")):
            rel = path.relative_to(artifact)
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                raise ArchiveError(f"{path}: not a regular file; refusing the artifact")
            if path.is_dir():
                continue
            _check_layout(path, rel)
            target = inside(into, *rel.parts, what="artifact path", source=path)
            if rel.parts[0] in RECORD_FOLDERS and target.exists():
                if _digest(target) != _digest(path):
                    raise ArchiveError(f"{path}: {target} exists with other content; "
                                       f"records are never overwritten")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target.with_name(f".{target.name}.part"))
            os.replace(target.with_name(f".{target.name}.part"), target)
            changed.append(rel.as_posix())
    return changed


def _check_layout(path: Path, rel: Path) -> None:
    parts = rel.parts
    try:
        for part in parts:
            safe_name(part, "artifact path component", path)
    except PathError as err:
        raise ArchiveError(str(err)) from err
    if parts[0] == "results" and (parts[1:] == ("benchmarks.json",) or (
            len(parts) == 3 and parts[2].endswith(".json"))):
        parse_json(path.read_text(), path)  # a truncated results file is refused
        return
    if parts[0] in RECORD_FOLDERS and len(parts) == 3 and parts[2].endswith(ARCHIVE_SUFFIX):
        _checked_members(path, parts[1])
        return
    if parts[0] == "upgrade" and len(parts) == 3 and parts[2] in ("gate.json", "gate.md"):
        if parts[2] == "gate.json":  # a night's upgrade report (kperf upgrade --newest)
            parse_json(path.read_text(), path)
        return
    raise ArchiveError(f"{path}: {rel.as_posix()!r} is not results/<machine>/<file>.json, "
                       f"results/benchmarks.json, {{{','.join(RECORD_FOLDERS)}}}/<machine>/"
                       f"<night>{ARCHIVE_SUFFIX} or upgrade/<night>/gate.{{json,md}}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="one machine's records into a tar.xz")
    p.add_argument("--records", type=Path, required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("store", help="merge nightly artifacts into the results branch")
    s.add_argument("--incoming", type=Path, required=True)
    s.add_argument("--into", type=Path, required=True)
    u = sub.add_parser("unpack", help="every archive into a records folder")
    u.add_argument("--archives", type=Path, required=True)
    u.add_argument("--dest", type=Path, required=True)
    u.add_argument("--keep-going", action="store_true",
                   help="skip an unreadable archive with a warning instead of stopping")
    c = sub.add_parser("check", help="check archives' records against the record schema")
    c.add_argument("archive", type=Path, nargs="+")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "pack":
            n = pack(args.records, args.machine, args.out)
            print(f"records: {n} files of {args.machine} in {args.out}")
        elif args.cmd == "store":
            changed = store(args.incoming, args.into)
            print(f"records: {len(changed)} files stored in {args.into}")
        elif args.cmd == "unpack":
            n, problems = unpack(args.archives, args.dest, args.keep_going)
            for problem in problems:
                print(f"warning: {problem}", file=sys.stderr)
            print(f"records: {n} files unpacked into {args.dest}")
        else:
            problems = [p for a in args.archive for p in check(a)]
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
    except (ArchiveError, ConfigError, PathError) as err:
        print(f"records: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
