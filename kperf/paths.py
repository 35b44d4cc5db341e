"""Paths built from names that came from files or machines, and scratch folders.

A machine name, a wheel name, a GPU folder read from a JSON file or a child process is
used as one path component only after ``safe_name`` accepted it, and ``inside`` proves
the joined path stays under its root (after resolving links). A tool deletes a folder
only through ``remove_scratch``: it must not overlap what is kept (results, records, the
site, the repository) and must be the tool's own: empty, or marked by ``make_scratch``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

# the same rule as kperf/schemas/common.json#/$defs/safe_name (a test keeps them equal)
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_NAME = 200
SCRATCH_MARKER = ".kperf-scratch"


class PathError(ValueError):
    """A name that would leave its root, or a folder that must not be deleted."""


def safe_name(value: object, what: str, source: str | Path = "") -> str:
    """``value`` if it is one plain path component, else ``PathError`` naming it."""
    prefix = f"{source}: " if source else ""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or len(value) > MAX_NAME:
        raise PathError(f"{prefix}{what} {value!r} is not a plain name (letters, digits and "
                        f". _ + - only, starting with a letter or digit; no '/', no '..')")
    return value


def inside(root: Path, *names: str, what: str = "name", source: str | Path = "") -> Path:
    """``root / names...``, refused unless every name is plain and the result, links
    resolved, is still under ``root``."""
    for name in names:
        safe_name(name, what, source)
    path = root.joinpath(*names)
    if not _within(path.resolve(), root.resolve()):
        prefix = f"{source}: " if source else ""
        raise PathError(f"{prefix}{what} {'/'.join(names)!r} leads outside {root} "
                        f"(to {path.resolve()})")
    return path


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def is_within(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or lies under it (links resolved)."""
    return _within(path.resolve(), root.resolve())


def overlaps(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return _within(a, b) or _within(b, a)


def check_scratch(path: Path, keep: Mapping[str, Path], what: str = "scratch folder",
                  not_above: Iterable[Path] = ()) -> None:
    """Refuse a scratch folder that is, holds or lies inside anything in ``keep``, or is
    or holds anything in ``not_above`` (e.g. the repository: scratch may lie inside it)."""
    if path.is_symlink():
        raise PathError(f"{what} {path} is a symbolic link; refusing to use it as scratch")
    for label, kept in keep.items():
        if overlaps(path, kept):
            raise PathError(f"{what} {path} overlaps the {label} {kept.resolve()}; it would "
                            f"be deleted with the scratch: choose another folder")
    for kept in not_above:
        if _within(kept.resolve(), path.resolve()):
            raise PathError(f"{what} {path} is or holds {kept.resolve()}; choose a folder "
                            f"inside it instead")


def make_scratch(path: Path, keep: Mapping[str, Path], what: str = "scratch folder",
                 not_above: Iterable[Path] = ()) -> Path:
    """Create ``path`` (after ``check_scratch``) and mark it as this tool's own."""
    check_scratch(path, keep, what, not_above)
    path.mkdir(parents=True, exist_ok=True)
    (path / SCRATCH_MARKER).write_text("made by a kperf tool; deleted and rebuilt by it\n")
    return path


def remove_scratch(path: Path, keep: Mapping[str, Path], what: str = "scratch folder",
                   own_files: Iterable[str] = (), not_above: Iterable[Path] = ()) -> None:
    """Delete a scratch folder: only if it does not overlap ``keep`` and is this tool's
    own (empty, marked by ``make_scratch``, or holding one of ``own_files``, the files
    by which a folder of an older version of the tool is known)."""
    check_scratch(path, keep, what, not_above)
    if not path.exists():
        return
    if not path.is_dir():
        raise PathError(f"{what} {path} is not a folder; refusing to delete it")
    mine = (path / SCRATCH_MARKER).is_file() or not any(path.iterdir()) \
        or any((path / name).is_file() for name in own_files)
    if not mine:
        raise PathError(f"{what} {path} exists and was not made by this tool (no "
                        f"{SCRATCH_MARKER}); refusing to delete it: remove it yourself or "
                        f"choose another folder")
    shutil.rmtree(path)


def kept_paths(repo: Path, conf: Mapping[str, object]) -> dict[str, Path]:
    """What a tool's scratch must never overlap: the published results, the per-sample
    records and the site (pass the repository itself as ``not_above``)."""
    return {
        "published results": (repo / str(conf.get("results_dir", "results"))).resolve(),
        "per-sample records": (repo / ".asv" / "records").resolve(),
        "site": (repo / str(conf.get("html_dir", "html"))).resolve(),
    }


def sha256_of(path: Path) -> str:
    """A file's sha256, read a MiB at a time (pinned wheels and packages are checked by it)."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
