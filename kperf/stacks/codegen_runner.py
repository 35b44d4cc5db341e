"""The CPU codegen runner: what a machine without a GPU (a GitHub-hosted runner) judges and
records of the code both languages generate, for gfx942 under every pinned ROCm toolchain
and for sm_90a. The workflows only call this (.github/workflows/perf-gate.yml and
perf-nightly.yml); docs/amd.md says how a team without AMD hardware uses it.

    kperf codegen pr --out gate-out             # merge-base vs HEAD
    kperf codegen pr --base HEAD~1 --head HEAD --out gate-out
    kperf codegen nightly --out nightly-out     # asv run NEW
    kperf codegen nightly --commits HEAD --out nightly-out

``pr``: the PR gate's static-figure and compile cases (thresholds.json ``codegen_subset``),
gfx942 TileLang once per toolchain, each toolchain its own verdict with the cause of
every change in the code's terms; ``gate.md``, ``gate.json`` and ``exit_code`` in
``--out`` (the gate's exit codes: 0 pass, 1 regression, 2 broken, 3 inconclusive, 4 the
gate failed).

``nightly``: the CPU-side suites in asv, every target and backend in one environment per
toolchain (a suite is one benchmark over targets and backends: a combination left out
would be a dead series; Triton's and sm_90a's figures, the same under every toolchain,
are the control), into the project's results under ``--machine``; ``--out`` gets
``results/<machine>/``, ``results/benchmarks.json`` and one archive a night of each records
folder (``records``, ``codegen-records``, ``compile-records``) for the results branch
(kperf/history/records_archive.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kperf import machine as machine_tool
from kperf import project
from kperf import toolchains as rocm_toolchain
from kperf.config import ConfigError
from kperf.core import hip
from kperf.core.worker import OWNER_ENV, run_workers
from kperf.gate import cli as gate_cli
from kperf.gate import report
from kperf.gate.asvio import derived_config, load_project_conf
from kperf.gate.errors import EXIT_GATE_ERROR
from kperf.history import asvrun, records_archive
from kperf.stacks.matrix import MatrixError, prepare_toolchains

DEFAULT_MACHINE = "ci-cpu-codegen"
LABEL = "cpu-codegen"


def pinned_toolchains() -> list[str]:
    """clang19 (Debian's LLVM 19, the default) and every ROCm release pinned in
    kperf/toolchains/rocm-toolchains.json, oldest first."""
    pins = rocm_toolchain.load_pins()
    return [hip.DEFAULT_TOOLCHAIN, *sorted(pins["rocm"], key=rocm_toolchain.version_key)]


def prepare(names: list[str] | None) -> list[str]:
    """The toolchains named (default: every pinned one), each installed and usable."""
    return prepare_toolchains(names or pinned_toolchains())


# --------------------------------------------------------------------------- pr


def cmd_pr(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    try:
        chains = prepare(args.rocm_toolchain)
    except (MatrixError, ConfigError) as err:
        return _failed(out, f"the gfx942 toolchains could not be prepared: {err}")
    argv = ["--repo", str(args.repo), "--label", args.label, "--machine", args.machine,
            "--out", str(out), "--rocm-toolchain", *chains, "--head", args.head]
    for flag, value in (("--base", args.base), ("--main-branch", args.main_branch),
                        ("--pr-dir", args.pr_dir)):
        if value:
            argv += [flag, str(value)]
    for regex in args.bench or []:
        argv += ["-b", regex]
    code = gate_cli.main(argv)
    code = upgrade_section(args, out, code)
    _exit_file(out, code)
    return code


# the exit codes from the one that must be seen first (kperf/gate/cli.py)
SEVERITY = (EXIT_GATE_ERROR, 2, 1, 3, 0)


def upgrade_section(args: argparse.Namespace, out: Path, code: int) -> int:
    """Where the pull request changes a compiler's pin (the stack extra of pyproject.toml,
    the ROCm toolchains), the upgrade report, base's pins against head's at head, appended
    to gate.md as its own section; the worse of the two exit codes."""
    from kperf.stacks import upgrade

    try:
        base = json.loads((out / "gate.json").read_text())["base"]
        packages, chains = upgrade.pin_changes(args.repo, base)
    except (OSError, KeyError, ValueError, upgrade.UpgradeError):
        return code  # the gate's own report says what failed
    if not packages and not chains:
        return code
    folder = out / "upgrade"
    argv = ["--repo", str(args.repo), "--base-pins", base, "--out", str(folder),
            "--machine", args.machine, *(f"-b{regex}" for regex in args.bench or [])]
    if args.pr_dir:
        argv += ["--pr-dir", str(args.pr_dir.resolve() / "upgrade")]
    upgraded = upgrade.main(argv)
    text = (folder / "gate.md").read_text() if (folder / "gate.md").exists() else (
        f"### Before you upgrade\n\nthe upgrade report failed (exit {upgraded})\n")
    with (out / "gate.md").open("a") as md:
        md.write("\n" + text.replace(report.COMMENT_MARKER + "\n", "").replace(
            "### Before you upgrade", "#### Before you upgrade", 1))
    return min((code, upgraded), key=SEVERITY.index)


def _failed(out: Path, message: str) -> int:
    print(f"codegen runner: {message}", file=sys.stderr)
    report.write_failure(out, message, EXIT_GATE_ERROR, LABEL)
    _exit_file(out, EXIT_GATE_ERROR)
    return EXIT_GATE_ERROR


def _exit_file(out: Path, code: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "exit_code").write_text(f"{code}\n")


# --------------------------------------------------------------------------- nightly


def nightly_config(conf: dict[str, Any], repo: Path, chains: list[str]) -> dict[str, Any]:
    """asv.conf.json with the toolchains as an environment matrix (``env_nobuild``, one
    environment each), results in the project's results folder (the history goes on),
    environments of their own. Give one toolchain a run: asv builds one environment for
    env_nobuild variants and tells only the first variant of a fresh run the commit it
    installed (``ASV_COMMIT``), so the others' records said "nocommit" and their compiles
    were taken for timed at commit "None" and skipped (the CPU machine, 2026-12-06)."""
    out = derived_config(conf, repo, repo / ".asv")
    out["results_dir"] = str((repo / conf.get("results_dir", ".asv/results")).resolve())
    out["html_dir"] = str((repo / conf.get("html_dir", "html")).resolve())
    out["env_dir"] = str((repo / ".asv" / "env-codegen").resolve())
    matrix = dict(conf.get("matrix") or {})
    matrix["env_nobuild"] = {**(matrix.get("env_nobuild") or {}), hip.TOOLCHAIN_ENV: chains}
    out["matrix"] = matrix
    return out


def cmd_nightly(args: argparse.Namespace) -> int:
    repo, started = args.repo, time.time()
    try:
        chains = prepare(args.rocm_toolchain)
    except (MatrixError, ConfigError) as err:
        print(f"codegen runner: the gfx942 toolchains could not be prepared: {err}",
              file=sys.stderr)
        return EXIT_GATE_ERROR
    conf = load_project_conf(repo / "asv.conf.json")
    info = machine_tool.describe(args.machine)
    machine_tool.write_machine_file(info)
    env = {**asvrun.asv_env(info["machine"], repo, cpu_only=True), "KPERF_COMPILE": "changed"}
    codegen, left_out = asvrun.codegen_selection(chains[0])
    if left_out:  # the one machine that should build them all
        print("codegen runner: cannot build here: " + "; ".join(
            f"{k}: {v}" for k, v in left_out.items()), file=sys.stderr)
        return EXIT_GATE_ERROR
    with run_workers("kperf-nightly-", logs=repo / ".asv" / "worker-logs"):
        env["KPERF_WORKER_DIR"] = os.environ["KPERF_WORKER_DIR"]
        env[OWNER_ENV] = os.environ[OWNER_ENV]
        failed = _asv_runs(args, repo, conf, info["machine"], chains, env, codegen)
    if failed:
        print(f"codegen runner: asv failed under {', '.join(failed)}: its results may be cut "
              f"short, so nothing of this night is stored", file=sys.stderr)
        return EXIT_GATE_ERROR
    if args.out:
        collect(repo, conf, info["machine"], args.out.resolve(), args.night, started)
    return 0


def _asv_runs(args: argparse.Namespace, repo: Path, conf: dict[str, Any], machine: str,
              chains: list[str], env: dict[str, str], codegen: list[str]) -> list[str]:
    """asv run under each toolchain; the toolchains whose run failed, and how."""
    failed = []
    for chain in chains:  # one asv run each: see ``nightly_config``
        path = repo / ".asv" / f"codegen-{chain}.asv.conf.json"
        path.write_text(json.dumps(nightly_config(conf, repo, [chain]), indent=2))
        run_args = ["--config", str(path), "run", args.commits, "--machine",
                    machine, "--record-samples", "--show-stderr", *_bench_args(codegen)]
        rc = asvrun.run_asv(run_args, env, repo).returncode
        print(f"codegen runner: asv run under {chain}: {_how_ended(rc)}", flush=True)
        # asv's 1 for NEW: no new commit; 2: some benchmark failed (recorded); anything
        # else (a signal is negative: killed, out of memory, cancelled) lost the run
        if rc not in (0, 1, 2):
            failed.append(f"{chain} ({_how_ended(rc)})")
    return failed


def _how_ended(rc: int) -> str:
    if rc < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def _bench_args(regexes: list[str]) -> list[str]:
    return [arg for regex in regexes for arg in ("-b", regex)]


def collect(repo: Path, conf: dict[str, Any], machine: str, out: Path, night: str,
            since: float = 0.0) -> None:
    """The night's results and its own records (written at or after ``since``: the
    compile records of earlier nights it began from stay in theirs), laid out as the
    results branch keeps them."""
    results = (repo / conf.get("results_dir", ".asv/results")).resolve()
    if (results / machine).is_dir():
        shutil.copytree(results / machine, out / "results" / machine, dirs_exist_ok=True)
        if (results / "benchmarks.json").exists():
            shutil.copy2(results / "benchmarks.json", out / "results" / "benchmarks.json")
    stamp = f"{dt.datetime.now(dt.UTC):%Y-%m-%d}-{night}"
    for folder in records_archive.RECORD_FOLDERS:
        root = repo / ".asv" / folder
        if (root / machine).is_dir() and any(
                p.stat().st_mtime >= since for p in (root / machine).rglob("*.json")):
            records_archive.pack(root, machine, out / folder / machine
                                 / f"{stamp}{records_archive.ARCHIVE_SUFFIX}", since)


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__[__doc__.index("    kperf "):])
    sub = parser.add_subparsers(dest="mode", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", type=Path, help="the project's folder (default: the one "
                        "kperf.toml marks, from here up)")
    common.add_argument("--rocm-toolchain", nargs="+", metavar="NAME",
                        help="gfx942 toolchains (default: every pinned one, clang19 first)")
    common.add_argument("--machine", default=DEFAULT_MACHINE)
    pr = sub.add_parser("pr", parents=[common], help="the PR gate's codegen verdicts")
    pr.add_argument("--base", help="default: merge-base of head and the main branch")
    pr.add_argument("--head", default="HEAD")
    pr.add_argument("--main-branch")
    pr.add_argument("--pr-dir", type=Path)
    pr.add_argument("--out", type=Path, required=True, help="gate.md, gate.json, exit_code")
    pr.add_argument("--label", default=LABEL)
    pr.add_argument("-b", "--bench", action="append", help="case regex (gate's -b)")
    night = sub.add_parser("nightly", parents=[common], help="the CPU-side history")
    night.add_argument("--commits", default="NEW", help="asv's revisions (default NEW)")
    night.add_argument("--out", type=Path, help="results and record archives to store")
    night.add_argument("--night", default=os.environ.get("NIGHT", "local"),
                       help="the archives' name after the date (the workflow's run id)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.repo = (args.repo or project.find().root).resolve()
    if args.mode == "pr":
        return cmd_pr(args)
    try:
        return cmd_nightly(args)
    except (records_archive.ArchiveError, subprocess.CalledProcessError, OSError) as err:
        print(f"codegen runner: {err}", file=sys.stderr)
        return EXIT_GATE_ERROR


if __name__ == "__main__":
    sys.exit(main())
