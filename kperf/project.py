"""The repository kperf measures: where it lies, which package holds its ops, which
packages are the code under test, and its configuration files.

A project is a folder with a ``kperf.toml`` (``kperf init`` writes one)::

    [kperf]
    ops = "myteam_kernels"            # the import package whose op folders kperf measures

    [kperf.measured]                  # the code under test, built at every commit:
    myteam_kernels = "src/myteam_kernels"   # import package = its folder in the repository

Without ``[kperf.measured]`` the ops package is the code under test, at its own name. A
repository that tracks a library written by others keeps its ops in a package of its
own and names the library there (``liger_kernel = "src/liger_kernel"``): the ops then come
from this repository's working tree, like the benchmarks, and the library from each commit.

Tools find the project from the working directory upwards; a benchmark process, a worker
or a side of the gate gets it through ``KPERF_PROJECT`` (the folder).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_NAME = "kperf.toml"
PROJECT_ENV = "KPERF_PROJECT"  # the project's folder, for the processes a tool starts
PACKAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProjectError(ValueError):
    """No project here, or a kperf.toml that cannot be used (the message names the file
    and the field)."""


@dataclass(frozen=True)
class Project:
    root: Path
    ops: str  # the import package holding the op folders
    measured: dict[str, str] = field(default_factory=dict)  # package -> its folder in the repo

    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def asv_conf(self) -> Path:
        return self.root / "asv.conf.json"

    @property
    def thresholds(self) -> Path:
        """The gate's thresholds: the project's own file, else the defaults kperf ships."""
        own = self.root / "thresholds.json"
        return own if own.is_file() else DEFAULTS / "thresholds.json"

    @property
    def history_thresholds(self) -> Path:
        own = self.root / "history-thresholds.json"
        return own if own.is_file() else DEFAULTS / "history-thresholds.json"

    @property
    def ops_measured(self) -> bool:
        """The ops are part of the code under test (each commit's), not this working tree's."""
        return self.ops in self.measured

    @property
    def ops_dir(self) -> Path:
        """The ops package's folder in the working tree."""
        if self.ops in self.measured:
            return self.root / self.measured[self.ops]
        return self.root / self.ops

    @property
    def git_repo(self) -> Path:
        """The git repository whose commits are measured: asv.conf.json's ``repo`` (this
        repository, or a library's clone that this one tracks)."""
        try:
            import json5

            url = str(json5.loads(self.asv_conf.read_text()).get("repo", "."))
        except (OSError, ValueError):
            url = "."
        return self.root if "://" in url else (self.root / url).resolve()

    def code_packages(self) -> list[str]:
        """Every package whose files make up what is measured: the measured packages and,
        where they are not among them, the ops."""
        return sorted({*self.measured, self.ops})

    def import_path(self) -> str:
        """The folder to put on ``sys.path`` to import the working tree's ops package."""
        return str(self.ops_dir.parent)

    def use_working_tree(self) -> None:
        """Make the working tree's ops package importable in this (tool) process."""
        path = self.import_path()
        if path not in sys.path:
            sys.path.insert(0, path)


DEFAULTS = Path(__file__).resolve().parent / "defaults"


def load(root: Path) -> Project:
    """The project of the folder ``root`` (its kperf.toml), checked."""
    path = root / CONFIG_NAME
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as err:
        raise ProjectError(f"{path}: cannot be read ({err.strerror or err}); `kperf init` "
                           f"writes one") from None
    except tomllib.TOMLDecodeError as err:
        raise ProjectError(f"{path}: not TOML: {err}") from None
    table = raw.get("kperf")
    if not isinstance(table, dict):
        raise ProjectError(f"{path}: no [kperf] table")
    unknown = sorted(set(table) - {"ops", "measured"})
    if unknown:
        raise ProjectError(f"{path}: [kperf] has unknown key(s) {unknown}; known: ops, "
                           f"measured")
    ops = table.get("ops")
    if not isinstance(ops, str) or not PACKAGE_NAME.fullmatch(ops):
        raise ProjectError(f"{path}: [kperf] ops = {ops!r}: expected the import name of the "
                           f"package holding the op folders, e.g. \"myteam_kernels\"")
    measured = table.get("measured", {ops: ops})
    if not isinstance(measured, dict) or not measured:
        raise ProjectError(f"{path}: [kperf.measured] must map each package under test to "
                           f"its folder, e.g. myteam_kernels = \"src/myteam_kernels\"")
    for name, folder in measured.items():
        if not PACKAGE_NAME.fullmatch(name):
            raise ProjectError(f"{path}: [kperf.measured] {name!r} is not an import name")
        if (not isinstance(folder, str) or not folder or Path(folder).is_absolute()
                or ".." in Path(folder).parts or Path(folder).name != name):
            raise ProjectError(f"{path}: [kperf.measured] {name} = {folder!r}: expected the "
                               f"package's folder relative to the repository, ending in "
                               f"{name!r} (e.g. \"src/{name}\")")
    return Project(root.resolve(), ops, dict(measured))


def find(start: Path | None = None) -> Project:
    """The project: ``KPERF_PROJECT`` if set, else the nearest folder from ``start`` (the
    working directory) upwards with a kperf.toml."""
    if os.environ.get(PROJECT_ENV):
        return _cached(Path(os.environ[PROJECT_ENV]).resolve())
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return _cached(folder)
    raise ProjectError(f"no {CONFIG_NAME} in {here} or above: run kperf inside a repository "
                       f"that `kperf init` set up")


def of(root: Path) -> Project:
    """The project at ``root`` if it has a kperf.toml, else the current one (``find``)."""
    return load(root) if (root / CONFIG_NAME).is_file() else find()


@functools.cache
def _cached(root: Path) -> Project:
    return load(root)


def environment(project: Project) -> dict[str, str]:
    """What the processes a tool starts need to find the project."""
    return {PROJECT_ENV: str(project.root)}
