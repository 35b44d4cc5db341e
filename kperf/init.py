"""``kperf init``: set up a repository for kperf, beside its own kernels.

    kperf init --ops myteam_kernels                      # ops in the package at ./myteam_kernels
    kperf init --ops myteam_kernels --path src/myteam_kernels
    kperf init --ops tracked_ops --measured liger_kernel=src/liger_kernel --repo ../Liger-Kernel

Writes what the main job, the gate, the CPU codegen runner, the history and the site need
(each file only where it is missing, unless ``--force``):

- ``kperf.toml``: which package holds the ops and which packages are the code under test;
- ``asv.conf.json``: asv builds those packages at every commit (kperf/suites/build.py) and
  links kperf and the stack into each environment;
- ``benchmarks/__init__.py`` and a ``bench_<op>.py`` per op the package already has;
- ``thresholds.json``: the gate's thresholds, kperf's defaults to edit;
- ``tests/test_kperf_ops.py``: kperf's checks of every op (contract, interpreter, codegen);
- the CI workflows (``--workflows``, kperf/workflows.py): the CPU codegen job always, the
  GPU gate and nightly only with an image pinned by digest for each GPU runner;
- ``.gitignore`` lines for what kperf writes (.asv/, html/, .cache/).

The ops package must exist (``kperf new-op`` then adds ops to it). The instrument is the
installed kperf, the same for every commit measured and recorded with each result.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from kperf import project

TEMPLATES = Path(__file__).resolve().parent / "templates"
IGNORED = (".asv/", "html/", ".cache/", "__pycache__/")


class InitError(ValueError):
    """The repository cannot be set up as asked (the message says why)."""


def kperf_toml(ops: str, measured: dict[str, str]) -> str:
    lines = ["# kperf's configuration of this repository (docs/teams.md)", "[kperf]",
             "# the import package whose op folders kperf measures", f'ops = "{ops}"']
    if measured != {ops: ops}:
        lines += ["", "# the code under test, built at every commit: package = its folder",
                  "[kperf.measured]", *(f'{name} = "{folder}"'
                                        for name, folder in sorted(measured.items()))]
    return "\n".join(lines) + "\n"


def asv_conf(name: str, repo_url: str, branch: str) -> str:
    conf = {
        "version": 1, "project": name, "project_url": "#", "show_commit_url": "#",
        "repo": repo_url, "branches": [branch], "dvcs": "git",
        "environment_type": "virtualenv",
        "matrix": {"req": {"pip+asv_runner": ["0.3.2"]}},
        "build_command": ["python -m kperf.suites.build {build_dir} {build_cache_dir}"],
        "install_command": [
            "in-dir={env_dir} python -m pip install --no-deps --no-index --force-reinstall "
            "{wheel_file}", "python -m kperf.stacks.asv_stack_site"],
        "uninstall_command": ["return-code=any python -m pip uninstall -y kperf-measured"],
        "benchmark_dir": "benchmarks", "env_dir": ".asv/env", "results_dir": ".asv/results",
        "html_dir": "html", "build_cache_size": 8, "default_benchmark_timeout": 900,
        "launch_method": "forkserver"}
    head = ("// asv's configuration, written by `kperf init`: asv builds the packages\n"
            "// kperf.toml names at every commit; `kperf run` links kperf and the stack in.\n")
    return head + json.dumps(conf, indent=4) + "\n"


BENCHMARKS_INIT = '''"""asv suites of this repository's ops: one ``bench_<op>.py`` each
(``kperf new-op`` writes it; ``kperf check`` keeps it in step with its op). asv reads this
folder from the working tree for every commit it measures; kperf, the measuring code, is
the installed one."""

from kperf.suites import benchmarks_package

benchmarks_package(__file__)
'''


def git_branch(root: Path) -> str:
    """The repository's main branch: origin's HEAD, else the current branch, else main."""
    for cmd in (["git", "symbolic-ref", "--short", "refs/remotes/origin/HEAD"],
                ["git", "symbolic-ref", "--short", "HEAD"]):
        out = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().removeprefix("origin/")
    return "main"


def plan(root: Path, ops: str, measured: dict[str, str], repo_url: str,
         branch: str) -> dict[Path, str]:
    """{file: its text} of everything init writes (the bench files come after)."""
    if not project.PACKAGE_NAME.fullmatch(ops):
        raise InitError(f"--ops {ops!r}: not an import name")
    files = {root / "kperf.toml": kperf_toml(ops, measured),
             root / "asv.conf.json": asv_conf(ops.replace("_", "-"), repo_url, branch),
             root / "benchmarks" / "__init__.py": BENCHMARKS_INIT,
             root / "thresholds.json": (project.DEFAULTS / "thresholds.json").read_text(),
             root / "tests" / "test_kperf_ops.py": (TEMPLATES / "test_kperf_ops.py").read_text()}
    return files


def write(files: dict[Path, str], force: bool) -> list[Path]:
    written = []
    for path, text in files.items():
        if path.exists() and not force:
            print(f"kept: {path} (it exists; --force writes it again)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def ignore(root: Path) -> None:
    """What kperf writes, in the repository's .gitignore."""
    path = root / ".gitignore"
    lines = path.read_text().splitlines() if path.exists() else []
    missing = [entry for entry in IGNORED if entry not in lines and f"/{entry}" not in lines]
    if missing:
        path.write_text("\n".join([*lines, "# kperf", *missing]) + "\n")


def parse_measured(items: list[str], ops: str, path: str | None) -> dict[str, str]:
    if not items:
        return {ops: path or ops}
    out = {}
    for item in items:
        name, sep, folder = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise InitError(f"--measured {item!r}: expected PACKAGE=FOLDER, e.g. "
                            f"liger_kernel=src/liger_kernel")
        out[name] = folder
    if path:
        out.setdefault(ops, path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="docs/teams.md walks through it")
    parser.add_argument("--ops", required=True, help="the import package of the ops")
    parser.add_argument("--path", help="its folder in the repository (default: its name)")
    parser.add_argument("--measured", action="append", metavar="PACKAGE=FOLDER",
                        help="a package under test other than the ops (a library the ops "
                             "wrap), built from --repo's commits; repeatable")
    parser.add_argument("--repo", default=".",
                        help="the git repository whose commits are measured (default: this "
                             "one; a path or URL for a library tracked from here)")
    parser.add_argument("--branch", help="its main branch (default: as git says)")
    parser.add_argument("--force", action="store_true", help="write over existing files")
    from kperf import workflows

    workflows.add_options(parser)
    args = parser.parse_args(argv)
    root = Path.cwd()
    try:
        measured = parse_measured(args.measured or [], args.ops, args.path)
        branch = args.branch or git_branch(root if args.repo == "." else Path(args.repo))
        files = plan(root, args.ops, measured, args.repo, branch)
        files.update(workflows.files(root, args, branch))
        proj = project.Project(root, args.ops, measured)
        if not (proj.ops_dir / "__init__.py").is_file():
            raise InitError(f"{proj.ops_dir.relative_to(root)}/__init__.py: no package "
                            f"{args.ops} there; create it (an __init__.py), or name its "
                            f"folder with --path")
    except (InitError, workflows.WorkflowError) as err:
        print(f"kperf init: {err}", file=sys.stderr)
        return 2
    for path in write(files, args.force):
        print(f"written: {path.relative_to(root)}")
    ignore(root)
    from kperf import check, testing
    from kperf.toolchains import ensure_hip_tree

    for name in testing.ops(root):
        if not (root / "benchmarks" / f"bench_{name}.py").exists() or args.force:
            print(f"written: {check.write_bench_file(project.load(root), name)}")
    missing = ensure_hip_tree()
    if missing:
        print(f"kperf init: the gfx942 toolchain's HIP headers: {missing}", file=sys.stderr)
    print("\nnext: kperf new-op NAME --like swiglu (an op), kperf check, kperf run "
          "(the main job), kperf gate (a PR); docs/teams.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
