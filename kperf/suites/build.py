"""Build the code under test of one commit as a wheel: the packages kperf.toml names under
``[kperf.measured]``, copied from the commit's tree, whatever the repository's own
packaging (setuptools-scm, C extensions for other platforms, heavy dependencies).

asv's ``build_command`` runs it for every commit (``kperf init`` writes the line) and the
PR gate builds each side with it, so both install exactly the same files::

    python -m kperf.suites.build {build_dir} {build_cache_dir}

A package missing from the commit is that commit's build failure, naming the folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kperf import project

DIST = "kperf-measured"  # the wheel's distribution (asv's uninstall_command removes it)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")


class BuildError(RuntimeError):
    """The commit lacks a measured package, or pip could not make the wheel."""


def build_wheel(proj: project.Project, tree: Path, out: Path) -> Path:
    """The wheel of ``proj``'s measured packages as they are in ``tree`` (a checkout of
    one commit), written into ``out``."""
    with tempfile.TemporaryDirectory(prefix="kperf-build-") as tmp:
        staging = Path(tmp)
        for package, folder in sorted(proj.measured.items()):
            source = tree / folder
            if not (source / "__init__.py").is_file():
                raise BuildError(f"{folder}/__init__.py is not in this commit's tree: the "
                                 f"package {package} (kperf.toml [kperf.measured]) does not "
                                 f"exist here")
            shutil.copytree(source, staging / package, ignore=IGNORED)
        (staging / "pyproject.toml").write_text(_pyproject(sorted(proj.measured)))
        out.mkdir(parents=True, exist_ok=True)
        before = set(out.glob("*.whl"))
        made = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--no-index", "--disable-pip-version-check", "-q", "-w", str(out), str(staging)],
            capture_output=True, text=True)
        if made.returncode != 0:
            raise BuildError(f"pip wheel of {sorted(proj.measured)} failed: "
                             f"{made.stderr.strip()[-800:]}")
    wheels = sorted(set(out.glob("*.whl")) - before) or sorted(out.glob(f"{_wheel_stem()}*.whl"))
    return wheels[-1]


def _wheel_stem() -> str:
    return DIST.replace("-", "_")


def _pyproject(packages: list[str]) -> str:
    return "\n".join([
        "[build-system]", 'requires = ["setuptools>=61"]',
        'build-backend = "setuptools.build_meta"', "", "[project]", f'name = "{DIST}"',
        'version = "0"', "", "[tool.setuptools.packages.find]",
        f"include = {[p for name in packages for p in (name, f'{name}.*')]!r}", "",
        "[tool.setuptools.package-data]", '"*" = ["**/*"]', ""]).replace("'", '"')


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m kperf.suites.build BUILD_DIR WHEEL_DIR", file=sys.stderr)
        return 2
    try:
        wheel = build_wheel(project.find(), Path(args[0]), Path(args[1]))
    except (BuildError, project.ProjectError) as err:
        print(f"kperf build: {err}", file=sys.stderr)
        return 1
    print(f"kperf build: {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
