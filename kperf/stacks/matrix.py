"""Stack matrix runs: one commit measured under several stacks, each a separate line.

Two ways to get a stack (docs/stacks.md has the step-by-step):

``pip``: asv's environment matrix over pip versions of Triton and/or TileLang, and/or over
gfx942 toolchains (``--rocm-toolchain``: the compiler that turns TileLang's HIP source into
a code object, ``kperf/core/hip.py``; a ROCm release's own LLVM runs on the CPU). Writes an
asv config derived from asv.conf.json with ``matrix.req`` extended by the versions (each
TileLang with its own apache-tvm-ffi pin), ``matrix.env_nobuild`` by the toolchains (one
environment each, built once), and its own results and site (``.asv/matrix/``). The
pinned packages are installed into each asv environment, where they come before the host
stack that ``kperf/stacks/asv_stack_site.py`` appends, so torch and everything else come from
the host stack and are not downloaded again.

``image``: one prebuilt image per ROCm (or CUDA) release. Run inside the image; the
stack's site directories are found from its interpreter (base, conda or venv), the
machine is named after GPU model and stack (``kperf.machine.stack_name``), and the
results go to the project's results directory, one folder per stack.

    kperf stacks pip --triton 3.7.1 3.8.0 -b GemmRegisters
    kperf stacks pip --tilelang 0.1.14 0.1.15
    kperf stacks pip --rocm-toolchain rocm-6.4.4 rocm-7.0.2 rocm-7.2.2
    kperf stacks image --stack-python /opt/venv/bin/python
    kperf stacks sites --stack-python /opt/conda/envs/py_3.10/bin/python

Compare two stacks afterwards with ``kperf compare-stacks`` (same verdicts as the gate).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf import machine as machine_tool
from kperf import project
from kperf import toolchains as rocm_toolchain
from kperf.config import ConfigError, parse_json, validate
from kperf.core import hip
from kperf.gate.asvio import derived_config, load_project_conf
from kperf.history import asvrun
from kperf.history.asvrun import CPU_SUITES, asv_env, link_dir, write_hashfile
from kperf.paths import PathError, inside

MATRIX_DIR = Path(".asv") / "matrix"

# Each TileLang release needs its own apache-tvm-ffi range (Requires-Dist of its wheel,
# read with `pip install --dry-run --no-deps --report`): the highest release in it.
COMPANIONS: dict[str, tuple[str, dict[str, str]]] = {
    "tilelang": ("apache-tvm-ffi", {"0.1.13": "0.1.12", "0.1.14": "0.1.12",
                                    "0.1.15": "0.1.12"}),
}

SITE_PROBE = r"""
import json, os, sys, sysconfig
stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
out = []
for entry in sys.path:
    if not entry or not os.path.isdir(entry):
        continue  # '' (the cwd), zipped stdlib, missing dirs
    real = os.path.realpath(entry)
    if real in stdlib or os.path.basename(real) == "lib-dynload":
        continue  # the standard library: the asv env has its own
    if real not in out:
        out.append(real)
print(json.dumps({"dirs": out, "python": "%d.%d" % sys.version_info[:2]}))
"""


class MatrixError(Exception):
    """Bad input or a failed step, with a message naming what to fix."""


# --------------------------------------------------------------------------- the stack


def probe_sites(python: str) -> dict[str, Any]:
    """The stack interpreter's package directories, in its own order, and its X.Y.

    Every ``sys.path`` directory outside the standard library: a base interpreter's
    dist-packages, a conda env's site-packages, a venv's site-packages plus the base's when
    the venv was made with system site packages, PYTHONPATH entries and ``.pth`` additions.
    """
    try:
        out = subprocess.run([python, "-c", SITE_PROBE], capture_output=True, text=True,
                             cwd="/", timeout=120)
    except OSError as err:
        raise MatrixError(f"--stack-python {python}: cannot run it ({err})") from err
    if out.returncode != 0:
        raise MatrixError(f"--stack-python {python}: probe failed: {out.stderr.strip()[-500:]}")
    # the directories go into a .pth file of every asv environment: one absolute path
    # per line, nothing else (kperf/schemas/site-probe.json)
    source = f"--stack-python {python} (site probe)"
    lines = out.stdout.strip().splitlines()
    try:
        return validate(parse_json(lines[-1] if lines else "", source), "site-probe", source)
    except ConfigError as err:
        raise MatrixError(str(err)) from err


def stack_env(machine: str, sites: dict[str, Any], stack_python: str, repo: Path,
              cpu_only: bool, record_dir: Path) -> dict[str, str]:
    env = asv_env(machine, repo, cpu_only=cpu_only)
    # kperf itself first (the instrument, the same under every stack), then the stack
    joined = os.pathsep.join([str(link_dir(project.of(repo))), *sites["dirs"]])
    env["KPERF_STACK_SITE"] = joined
    env["ASV_PYTHONPATH"] = joined
    env["KPERF_RECORD_DIR"] = str(record_dir)
    # A stack comparison sets each stack against the others at this commit: the torch
    # baseline, the cold compiles and the kernels are timed in every stack, not only where
    # they changed (a KPERF_KERNELS=changed of the caller's environment included)
    env["KPERF_BASELINE"] = env["KPERF_COMPILE"] = env["KPERF_KERNELS"] = "every"
    # asv's virtualenv looks for pythonX.Y on PATH: find the stack's own interpreter first
    bin_dir = str(Path(stack_python).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


# --------------------------------------------------------------------------- pins


def pip_report(requirement: str) -> dict[str, Any]:
    """What pip would install for one requirement, metadata only (no wheel download)."""
    with tempfile.TemporaryDirectory(prefix="kperf-pip-report-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
               "--ignore-installed", "--quiet", "--report", str(report), requirement]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if out.returncode != 0 or not report.exists():
            raise MatrixError(f"pip cannot resolve {requirement!r}: {out.stderr.strip()[-500:]}")
        install = json.loads(report.read_text()).get("install") or []
    if not install:
        raise MatrixError(f"pip resolved nothing for {requirement!r}")
    return install[0]["metadata"]


def companion_pin(package: str, version: str) -> tuple[str, str] | None:
    """(companion package, pinned version) a release of ``package`` must be paired with."""
    if package not in COMPANIONS:
        return None
    companion, known = COMPANIONS[package]
    if version in known:
        return companion, known[version]
    requires = pip_report(f"{package}=={version}").get("requires_dist") or []
    wanted = [r for r in requires if r.replace("_", "-").lower().startswith(companion)
              and ";" not in r]
    if not wanted:
        return None
    spec = wanted[0][len(companion):].strip().strip("()")
    return companion, pip_report(f"{companion}{spec}")["version"]


def matrix_pins(versions: dict[str, Sequence[str]]) -> tuple[dict[str, list[str]], list[dict]]:
    """(req matrix, exclude rules): each package's versions, companions paired by excludes."""
    req: dict[str, list[str]] = {}
    pairs: dict[str, list[tuple[str, str, str]]] = {}
    for package, wanted in versions.items():
        if not wanted:
            continue
        if len(set(wanted)) != len(wanted):
            raise MatrixError(f"--{package}: a version is listed twice: {list(wanted)}")
        req[package] = list(wanted)
        for version in wanted:
            pin = companion_pin(package, version)
            if pin:
                pairs.setdefault(pin[0], []).append((package, version, pin[1]))
    excludes = []
    for companion, chosen in pairs.items():
        req[companion] = sorted({v for _, _, v in chosen})
        for package, version, pin in chosen:
            excludes += [{"req": {package: version, companion: other}}
                         for other in req[companion] if other != pin]
    return req, excludes


def matrix_config(conf: dict[str, Any], repo: Path, out_dir: Path, req: dict[str, list[str]],
                  excludes: list[dict], python: str,
                  toolchains: Sequence[str] = ()) -> dict[str, Any]:
    """asv.conf.json with the stack matrix, its own results and site under ``out_dir``."""
    out = derived_config(conf, repo, out_dir)
    matrix = dict(conf.get("matrix") or {})
    clash = sorted(set(req) & set(matrix.get("req") or {}))
    if clash:
        raise MatrixError(f"asv.conf.json matrix.req already sets {clash}; the stack matrix "
                          f"cannot vary them too")
    matrix["req"] = {**(matrix.get("req") or {}), **req}
    if toolchains:
        matrix["env_nobuild"] = {**(matrix.get("env_nobuild") or {}),
                                 hip.TOOLCHAIN_ENV: list(toolchains)}
    out["matrix"] = matrix
    out["exclude"] = list(conf.get("exclude") or []) + excludes
    out["pythons"] = [python]
    return out


# --------------------------------------------------------------------------- running


def write_machine(args: argparse.Namespace, stack_python: str, varied: Sequence[str],
                  stack: bool) -> dict[str, str]:
    info = machine_tool.describe(args.machine, stack_python, stack=stack)
    for key in varied:  # the environment's req value is what each result records
        info[key] = "matrix"
    machine_tool.write_machine_file(info)
    return info


def run_and_publish(conf_path: Path, env: dict[str, str], args: argparse.Namespace,
                    machine: str, cpu_only: bool) -> int:
    """asv run of ``args.commit`` in every environment of ``conf_path``, then its site."""
    shas = [subprocess.check_output(["git", "rev-parse", f"{r}^{{commit}}"], cwd=args.repo,
                                    text=True).strip() for r in args.commit]
    with write_hashfile(shas, Path(args.repo) / ".asv") as hashfile:
        run_args = ["run", f"HASHFILE:{hashfile}", "--machine", machine,
                    "--record-samples", "--show-stderr"]
        if args.interleave:
            run_args.append("--interleave-rounds")
        for regex in args.bench or ([CPU_SUITES] if cpu_only else []):
            run_args += ["-b", regex]
        for attribute in args.attribute or []:
            run_args += ["-a", attribute]
        html_dir = Path(json.loads(conf_path.read_text())["html_dir"])
        return asvrun.run_and_publish(run_args, env, args.repo, ["--config", str(conf_path)],
                                      html_dir, Path(env["KPERF_RECORD_DIR"]),
                                      publish=not args.no_publish)


def prepare_toolchains(names: Sequence[str]) -> list[str]:
    """The gfx942 toolchains named, each installed (a ROCm release's LLVM is fetched by its
    pin in kperf/toolchains/rocm-toolchains.json) and usable; the order given."""
    if len(set(names)) != len(names):
        raise MatrixError(f"--rocm-toolchain: a toolchain is listed twice: {list(names)}")
    try:
        pins = rocm_toolchain.load_pins()
        rocm_toolchain.install_hip_tree(pins, hip.toolchain_root())
        for name in names:
            if name.startswith("rocm-"):
                rocm_toolchain.fetch_rocm(name, pins, hip.toolchain_root())
            elif name == hip.CLANG22:
                rocm_toolchain.fetch_clang22(pins, hip.toolchain_root())
            hip.toolchain(name)
    except (rocm_toolchain.ToolchainError, ConfigError, hip.ToolchainMissing) as err:
        raise MatrixError(f"--rocm-toolchain: {err}") from err
    return list(names)


def _compare_hint(req: dict[str, list[str]], toolchains: Sequence[str]) -> str:
    if req:
        key = next(iter(req))
        return f"--base {key}={req[key][0]} --head {key}={req[key][-1]}"
    key = f"env-{hip.TOOLCHAIN_ENV}"
    return f"--base {key}={toolchains[0]} --head {key}={toolchains[-1]}"


def cmd_pip(args: argparse.Namespace) -> int:
    repo = args.repo
    conf = load_project_conf(args.config or repo / "asv.conf.json")
    req, excludes = matrix_pins({"triton": args.triton or [], "tilelang": args.tilelang or []})
    toolchains = prepare_toolchains(args.rocm_toolchain or [])
    if sum(len(v) for v in req.values()) + len(toolchains) < 2:
        raise MatrixError("give at least two stacks: --triton A B, --tilelang A B and/or "
                          "--rocm-toolchain A B")
    sites = probe_sites(args.stack_python)
    out_dir = (args.out or repo / MATRIX_DIR).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    conf_path = out_dir / "asv.conf.json"
    conf_path.write_text(json.dumps(matrix_config(conf, repo, out_dir, req, excludes,
                                                  sites["python"], toolchains), indent=2))
    info = write_machine(args, args.stack_python, list(req), stack=False)
    cpu_only = info["gpu"] == "none"
    env = stack_env(info["machine"], sites, args.stack_python, repo, cpu_only,
                    out_dir / "records")
    print(f"matrix: {req or ''} {toolchains or ''} on machine {info['machine']!r}; "
          f"config {conf_path}", flush=True)
    rc = run_and_publish(conf_path, env, args, info["machine"], cpu_only)
    print(f"matrix: results {out_dir / 'results'}, site {out_dir / 'html'}; compare with\n"
          f"  kperf compare-stacks --results {out_dir / 'results'} "
          f"{_compare_hint(req, toolchains)}")
    return rc


def image_config(conf: dict[str, Any], repo: Path, machine: str, python: str) -> dict[str, Any]:
    """The project's results and site (a folder per stack machine), environments per stack.

    Images share the checkout, and an asv environment built on one image's Python is
    useless in another, so each stack machine gets its own ``env_dir``.
    """
    results = (repo / conf.get("results_dir", "results")).resolve()
    out = derived_config(conf, repo, results.parent)
    out["results_dir"] = str(results)
    out["html_dir"] = str((repo / conf.get("html_dir", "html")).resolve())
    out["env_dir"] = str(inside(repo / ".asv" / "env-stacks", machine,
                                what="machine name").resolve())
    out["pythons"] = [python]
    return out


def cmd_image(args: argparse.Namespace) -> int:
    repo = args.repo
    conf = load_project_conf(args.config or repo / "asv.conf.json")
    sites = probe_sites(args.stack_python)
    info = write_machine(args, args.stack_python, [], stack=True)
    cpu_only = info["gpu"] == "none"
    results = (repo / conf.get("results_dir", "results")).resolve()
    conf_path = inside(repo / MATRIX_DIR, f"image-{info['machine']}.asv.conf.json",
                       what="machine name")
    conf_path.parent.mkdir(parents=True, exist_ok=True)
    conf_path.write_text(json.dumps(image_config(conf, repo, info["machine"], sites["python"]),
                                    indent=2))
    env = stack_env(info["machine"], sites, args.stack_python, repo, cpu_only,
                    results.parent / "records")
    print(f"matrix: stack {info['machine']!r} from {args.stack_python}; site dirs "
          f"{sites['dirs']}; config {conf_path}", flush=True)
    return run_and_publish(conf_path, env, args, info["machine"], cpu_only)


def cmd_sites(args: argparse.Namespace) -> int:
    sites = probe_sites(args.stack_python)
    stack = machine_tool.probe_stack(args.stack_python)
    info = {k: stack.get(k, "") for k in ("torch", "triton", "tilelang", "cuda", "gpu")}
    info["rocm"] = machine_tool.rocm_version() or stack.get("hip", "")
    print(json.dumps({"python": sites["python"], "site_dirs": sites["dirs"], "stack": info,
                      "stack_name": machine_tool.stack_name(info)}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__[__doc__.index("    kperf "):])
    sub = parser.add_subparsers(dest="mode", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--repo", type=Path, help="the project's folder (default: the one "
                        "kperf.toml marks, from here up)")
    common.add_argument("--stack-python", default=sys.executable,
                        help="the interpreter that holds torch/Triton/TileLang (default: this)")
    for name, helptext in (("pip", "asv environment matrix over pip versions"),
                           ("image", "this image's stack as one machine")):
        p = sub.add_parser(name, parents=[common], help=helptext)
        p.add_argument("--config", type=Path, help="asv config (default <repo>/asv.conf.json)")
        p.add_argument("--machine", help="machine name (pip: default from host and GPU; "
                                         "image: default from GPU model and stack)")
        p.add_argument("--commit", nargs="+", default=["HEAD"], help="revisions to measure")
        p.add_argument("-b", "--bench", action="append", help="asv benchmark regex")
        p.add_argument("-a", "--attribute", action="append", help="asv -a, e.g. rounds=2")
        p.add_argument("--no-interleave", dest="interleave", action="store_false",
                       help="do not alternate the stacks round by round")
        p.add_argument("--no-publish", action="store_true")
    pip = sub.choices["pip"]
    pip.add_argument("--triton", nargs="+", metavar="VERSION")
    pip.add_argument("--tilelang", nargs="+", metavar="VERSION")
    pip.add_argument("--rocm-toolchain", nargs="+", metavar="NAME",
                     help="gfx942 toolchains for TileLang's HIP source: clang19, llvm19, "
                          "rocm-<version> (kperf/toolchains/rocm-toolchains.json)")
    pip.add_argument("--out", type=Path, help=f"results, site and config (default {MATRIX_DIR})")
    sub.add_parser("sites", parents=[common], help="print the stack's site dirs and name")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.repo = (args.repo or project.find().root).resolve()
    handlers = {"pip": cmd_pip, "image": cmd_image, "sites": cmd_sites}
    try:
        return handlers[args.mode](args)
    except (MatrixError, PathError) as err:
        print(f"matrix: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
