"""Which files of the code under test one op's figures depend on.

Every digest (the static figures' cache, the cold compiles', the timings'), every
worker's fingerprint and the gate's "code unchanged" read the files named here, so a
commit that changes what an op runs changes its figures, and one that does not leaves
them (an edit of another op's folder, of a backend's module the case does not run).

An op's files are its ops package's, less the other ops' folders, plus each module of
another op that its files import (``from kernels.gemm.triton_gemm import grouped_tile``),
followed transitively; where the ops package is not the code under test (it tracks a
library), every file of each measured package too. Nothing is imported: the imports are
read from the files' syntax.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Collection, Iterable
from pathlib import Path

SKIPPED = ("__pycache__",)
SKIPPED_SUFFIXES = (".pyc", ".pyo")


def package_dir(package: str) -> Path:
    """Where ``package`` is imported from in this process (the commit's, in an asv env)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no package {package!r} on this process's path",
                                  name=package)
    return Path(next(iter(spec.submodule_search_locations)))


def package_files(root: Path) -> list[Path]:
    """Every file of a package folder, bytecode and caches left out."""
    return sorted(p for p in root.rglob("*") if p.is_file()
                  and not any(part in SKIPPED for part in p.relative_to(root).parts)
                  and p.suffix not in SKIPPED_SUFFIXES)


def op_files(root: Path, package: str, op: str, ops: Collection[str],
             exclude: Collection[Path] = ()) -> list[Path]:
    """The files of the ops package at ``root`` that op ``op`` reads (module docstring);
    ``exclude``: files left out (its other backends' modules)."""
    others = {root / name for name in ops if name != op}
    own = [p for p in package_files(root) if not any(o in p.parents for o in others)]
    found = set(own)
    pending = [p for p in own if p.suffix == ".py"]
    while pending:
        for path in _imported_files(pending.pop(), root, package):
            if path not in found:
                found.add(path)
                pending.append(path)
    return sorted(found - set(exclude))


def _imported_files(path: Path, root: Path, package: str) -> Iterable[Path]:
    """The package's module files that ``path`` imports, absolute or relative."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return  # its bytes are hashed all the same; a broken file breaks its own op
    rel = path.relative_to(root).with_suffix("").parts
    here = [package, *rel[:-1]]  # the package a relative import starts from
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[:len(here) - node.level + 1]
                base = ".".join([*anchor, *filter(None, [base])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] != package:
                continue
            target = root.joinpath(*parts[1:])
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if candidate.is_file():
                    yield candidate


def digest_files(digest: hashlib._Hash, root: Path, paths: Iterable[Path]) -> None:
    """Each file's path under ``root`` and its bytes, in path order."""
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes()
                      + b"\0")
