"""``kperf upgrade``: before you upgrade Triton, TileLang or a gfx942 toolchain, what the
candidate does to every kernel's code, on a CPU.

    kperf upgrade --triton 3.9.0
    kperf upgrade --tilelang 0.1.16 --rocm-toolchain rocm-6.4.4=rocm-7.2.2
    kperf upgrade --site ~/triton-main/python/build/site -b Gemm   # a local build

One commit (HEAD) on both sides of the CPU codegen gate: base compiles with the pinned
stack (this interpreter's packages), head with the candidate's packages put first on its
path (installed by pip, without dependencies, into ``.asv/upgrade/sites/<candidate>``:
torch and everything else stay the pinned ones) and, for a toolchain ``OLD=NEW``, TileLang's
gfx942 HIP source compiled by NEW where base uses OLD. Verdicts and lines are the gate's
(docs/gate.md): a figure is SLOW only where it costs (occupancy falls, spills or scratch
appear, LDS past the target's limit), a register count that moves at unchanged occupancy
is "changed, no cost" with its headroom, and cold compiles are judged by the compile class.
Exit codes are the gate's. The report: ``<out>/gate.md`` and ``gate.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from kperf.gate import cli as gate_cli
from kperf.gate.codegen import NAMES
from kperf.gate.config import Thresholds
from kperf.gate.errors import EXIT_GATE_ERROR, GateError
from kperf.gate.plan import GatePlan, Lane
from kperf.specs import GateCase
from kperf.toolchains import version_key

SITES = Path(".asv") / "upgrade" / "sites"
# the compilers a candidate may replace, as pip names them
PACKAGES = ("triton", "tilelang", "apache-tvm-ffi")
_SITE_DONE = ".kperf-installed"
TOOLCHAIN_PINS = "kperf/toolchains/rocm-toolchains.json"


class UpgradeError(GateError):
    """A candidate that cannot be made ready: the gate's own failure (exit 4)."""


def parse_chains(pairs: list[str]) -> dict[str, str]:
    """``OLD=NEW`` gfx942 toolchain pairs, each name one the gate knows."""
    chains: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new or old == new:
            raise UpgradeError(f"--rocm-toolchain {pair!r}: want OLD=NEW, two different "
                               f"toolchains (e.g. rocm-6.4.4=rocm-7.2.2)")
        if old in chains:
            raise UpgradeError(f"--rocm-toolchain: {old} is given twice")
        chains[old] = new
    return chains


def requirements(args: argparse.Namespace) -> list[str]:
    """The candidate's pip requirements: each release asked for, with the companion its
    release needs (TileLang's apache-tvm-ffi: kperf/stacks/matrix.py)."""
    from kperf.stacks.matrix import MatrixError, companion_pin

    out = []
    for package in ("triton", "tilelang"):
        version = getattr(args, package)
        if not version:
            continue
        if not re.fullmatch(r"[0-9A-Za-z.+!-]{1,60}", version):
            raise UpgradeError(f"--{package} {version!r}: not a version")
        out.append(f"{package}=={version}")
        try:
            pin = companion_pin(package, version)
        except MatrixError as err:
            raise UpgradeError(f"--{package} {version}: {err}") from err
        if pin:
            out.append(f"{pin[0]}=={pin[1]}")
    return out


def pins_at(repo: Path, revision: str | None) -> tuple[dict[str, str], list[str]]:
    """(the compilers the ``stack`` extra of pyproject.toml pins, the ROCm toolchains that
    kperf/toolchains/rocm-toolchains.json pins, oldest first) at ``revision`` (None: the
    working tree); what a file does not hold is empty."""
    def read(path: str) -> str:
        if revision is None:
            file = repo / path
            return file.read_text() if file.exists() else ""
        shown = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=repo,
                               capture_output=True, text=True)
        return shown.stdout if shown.returncode == 0 else ""

    try:
        extra = tomllib.loads(read("pyproject.toml") or "").get("project", {}).get(
            "optional-dependencies", {}).get("stack", [])
        chains = json.loads(read(TOOLCHAIN_PINS) or "{}").get("rocm", {})
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, AttributeError) as err:
        raise UpgradeError(f"the pins at {revision or 'the working tree'} cannot be read: "
                           f"{err}") from err
    pins = {}
    for requirement in extra:
        name, sep, version = str(requirement).partition("==")
        name = name.strip().lower().replace("_", "-")
        if sep and name in PACKAGES:
            pins[name] = version.strip()
    return pins, sorted(chains, key=version_key)


def pin_changes(repo: Path, base: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """What a change of pins from ``base`` to the working tree upgrades: ({package: (old,
    new)}, {old toolchain: new}); a new ROCm toolchain is set against the newest one it
    replaces (the newest pinned before against the newest pinned now)."""
    old, old_chains = pins_at(repo, base)
    new, new_chains = pins_at(repo, None)
    packages = {name: (old[name], new[name]) for name in PACKAGES
                if name in old and name in new and old[name] != new[name]}
    chains = {}
    if old_chains and new_chains and old_chains[-1] != new_chains[-1]:
        chains[old_chains[-1]] = new_chains[-1]
    return packages, chains


def install_site(repo: Path, reqs: list[str], find_links: Path | None) -> Path:
    """The candidate's packages, installed once into their own folder and kept."""
    name = "_".join(r.replace("==", "-") for r in reqs)
    if len(name) > 80:
        name = hashlib.sha256(name.encode()).hexdigest()[:16]
    site = repo / SITES / name
    if (site / _SITE_DONE).exists():
        return site
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install",
               "--no-deps", "--upgrade", "--target", str(site), *reqs]
    if find_links:
        command += ["--no-index", "--find-links", str(find_links)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise UpgradeError(f"pip could not install {' '.join(reqs)} into {site}: "
                           f"{done.stderr.strip()[-800:]}")
    (site / _SITE_DONE).write_text("\n".join(reqs) + "\n")
    return site


def site_versions(site: Path) -> dict[str, str]:
    """The compilers a folder of packages holds, by their installed metadata."""
    found = {d.metadata["Name"].lower().replace("_", "-"): d.version
             for d in metadata.distributions(path=[str(site)])}
    return {name: found[name] for name in PACKAGES if name in found}


def pinned_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def label_of(versions: dict[str, str], chains: dict[str, str], other: dict[str, str]) -> str:
    """``triton 3.9.0, rocm-7.2.2``: what a side's stack is, its changed parts first."""
    parts = [f"{name} {version}" for name, version in versions.items()
             if other.get(name) != version]
    parts += [f"gfx942 {chain}" for chain in chains]
    return ", ".join(parts) or "unchanged"


def prepare(chains: dict[str, str]) -> None:
    """Both toolchains of each pair installed and usable (a ROCm release's LLVM is fetched
    by its pin the first time)."""
    if not chains:
        return
    from kperf.stacks.matrix import MatrixError, prepare_toolchains

    try:
        prepare_toolchains(sorted({*chains, *chains.values()}))
    except MatrixError as err:
        raise UpgradeError(str(err)) from err


def stacks_of(args: argparse.Namespace, repo: Path) -> dict[str, dict[str, Any]]:
    """{"base": the pinned stack, "head": the candidate}, the candidate's site ready; with
    ``--base-pins REV``, base the stack REV pinned (installed) and head this interpreter's."""
    if args.base_pins:
        return _bumped(args, repo)
    chains = parse_chains(args.rocm_toolchain or [])
    prepare(chains)
    reqs = requirements(args)
    if args.site and reqs:
        raise UpgradeError("--site is the candidate's packages already installed: give it or "
                           "--triton/--tilelang, not both")
    site = args.site.resolve() if args.site else (
        install_site(repo, reqs, args.find_links) if reqs else None)
    if site is not None and not site.is_dir():
        raise UpgradeError(f"--site {site}: not a folder")
    if site is None and not chains:
        raise UpgradeError("nothing to upgrade: give --triton, --tilelang, --site or "
                           "--rocm-toolchain OLD=NEW")
    pinned = pinned_versions()
    candidate = site_versions(site) if site else {}
    if site is not None and not candidate:
        raise UpgradeError(f"{site}: holds none of {', '.join(PACKAGES)} (no installed "
                           f"metadata)")
    head = {"label": label_of(candidate, list(chains.values()), pinned),
            "versions": {**candidate, **{f"gfx942 {o}": n for o, n in chains.items()}}}
    if site is not None:
        head["site"] = str(site)
    base = {"label": label_of({k: v for k, v in pinned.items() if k in candidate},
                              list(chains), {}),
            "versions": {**{k: v for k, v in pinned.items() if k in candidate},
                         **{f"gfx942 {o}": o for o in chains}}}
    return {"base": base, "head": head}


def _bumped(args: argparse.Namespace, repo: Path) -> dict[str, dict[str, Any]]:
    """A pull request's change of pins: base the pins of ``--base-pins``, installed; head
    the pins of the working tree, which must be this interpreter's (tools/setup_env.sh)."""
    if args.triton or args.tilelang or args.site or args.rocm_toolchain:
        raise UpgradeError("--base-pins takes the candidate from the pins: no --triton, "
                           "--tilelang, --site or --rocm-toolchain with it")
    packages, chains = pin_changes(repo, args.base_pins)
    if not packages and not chains:
        raise UpgradeError(f"no compiler pin changed since {args.base_pins}")
    running = pinned_versions()
    for name, (_old, new) in packages.items():
        if running.get(name) != new:
            raise UpgradeError(f"{name} {new} is pinned, this interpreter has "
                               f"{running.get(name, 'none')}: set it up first "
                               f"(tools/setup_env.sh)")
    args.rocm_toolchain = [f"{o}={n}" for o, n in chains.items()]
    prepare(chains)
    old = {name: pair[0] for name, pair in packages.items()}
    base: dict[str, Any] = {"label": label_of(old, list(chains), {}),
                            "versions": {**old, **{f"gfx942 {o}": o for o in chains}}}
    if old:
        base["site"] = str(install_site(repo, [f"{n}=={v}" for n, v in old.items()],
                                        args.find_links))
    new = {name: pair[1] for name, pair in packages.items()}
    return {"base": base, "head": {"label": label_of(new, list(chains.values()), {}),
                                   "versions": {**new, **{f"gfx942 {o}": n
                                                          for o, n in chains.items()}}}}


def upgrade_plan(args: argparse.Namespace, repo: Path, pr_dir: Path,
                 th: Thresholds) -> GatePlan:
    """The gate's CPU codegen plan at one commit, each side its stack; every kernel
    measured (the code is the same on both sides: the stack is what changes)."""
    stacks = stacks_of(args, repo)
    chains = parse_chains(args.rocm_toolchain or [])
    if chains:
        args.rocm_toolchain = list(chains)
    args.base = args.head
    args.every_case = True
    plan = gate_cli.plan_run(args, repo, pr_dir, th)
    changed = set(stacks["head"]["versions"]) - {f"gfx942 {o}" for o in chains}
    cases = [{**c, "toolchain_head": chains[c["toolchain"]]}
             if c.get("toolchain") in chains else c for c in plan.cases]
    kept = [c for c in cases if affected(c, changed)]
    if not kept:
        raise UpgradeError("no selected kernel is compiled by what this candidate changes "
                           f"({stacks['head']['label']})")
    left = sorted({NAMES.get(b, b) for b in (c["spec"].get("backend") for c in cases
                                             if c not in kept) if b})
    plan = replace(plan, cases=kept, lanes=[Lane(cases=[c["name"] for c in kept])])
    if getattr(args, "components", None):
        stacks["head"]["components"] = args.components
    plan.stacks = stacks
    plan.label = stacks["head"]["label"]
    plan.base_how = (f"{' and '.join(left)} kernels not compiled: their compilers are the "
                     f"same on both sides" if left else "every kernel's compilers differ")
    return plan


def affected(case: GateCase, changed: set[str]) -> bool:
    """Whether a case's kernel is compiled by a part of the stack the candidate changes:
    Triton's by triton; TileLang's by tilelang and apache-tvm-ffi, and its gfx942 code by
    the toolchain that compiles its HIP source."""
    backend = case.get("spec", {}).get("backend")
    if backend == "triton":
        return "triton" in changed
    if backend == "tilelang":
        return bool(changed & {"tilelang", "apache-tvm-ffi"}) or "toolchain_head" in case
    return False


def build_parser() -> argparse.ArgumentParser:
    parser = gate_cli.GateParser(
        prog="kperf upgrade", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triton", help="the candidate Triton release (from the index)")
    parser.add_argument("--tilelang", help="the candidate TileLang release (with the "
                                           "apache-tvm-ffi it needs)")
    parser.add_argument("--site", type=Path, help="the candidate's packages, already "
                                                  "installed in this folder (a local build)")
    parser.add_argument("--rocm-toolchain", nargs="+", metavar="OLD=NEW",
                        help="AMD toolchains: base compiles TileLang's HIP source with OLD, "
                             "head with NEW (clang19, llvm19, clang22, rocm-<version>; for "
                             "gfx950 clang19 and llvm19 are clang22)")
    parser.add_argument("--base-pins", metavar="REV",
                        help="a change of pins: base compiles with what REV pinned "
                             "(pyproject.toml's stack extra, the ROCm toolchains), head with "
                             "this interpreter's, the working tree's pins")
    parser.add_argument("--newest", action="store_true",
                        help="the newest Triton and TileLang on the package index against "
                             "the pins (the nightly's run); nothing to do where none is newer")
    parser.add_argument("--find-links", type=Path,
                        help="install the candidate from this folder of wheels, offline")
    parser.add_argument("--commit", dest="head", default="HEAD", metavar="REV",
                        help="the commit whose kernels are compiled (default HEAD)")
    parser.add_argument("-b", "--bench", action="append",
                        help="case regex (default: every static figure and cold compile)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(),
                        help="the project's folder (default: here)")
    parser.add_argument("--machine", help="machine name in the report (default: this host's)")
    parser.add_argument("--out", type=Path, help="report folder (default the run's folder)")
    parser.add_argument("--pr-dir", type=Path,
                        help="the run's folder (default .asv/upgrade/<candidate>)")
    parser.add_argument("--resume", action="store_true", help="continue a stored run")
    parser.add_argument("--no-run", action="store_true", help="decide the stored run again")
    parser.add_argument("--max-rows", type=int, default=60)
    return parser


def run_dir(args: argparse.Namespace) -> Path:
    """Each candidate's run in its own folder, so --resume finds it again."""
    what = "_".join(f"{k}-{getattr(args, k)}" for k in ("triton", "tilelang")
                    if getattr(args, k)) or ("site" if args.site else "")
    what += "".join(f"_{p.replace('=', '-')}" for p in args.rocm_toolchain or [])
    what = f"pins-since-{args.base_pins}" if args.base_pins else what
    what = re.sub(r"[^0-9A-Za-z._-]", "_", what.strip("_")) or "candidate"
    return args.repo.resolve() / ".asv" / "upgrade" / what[:100]


def one_at_a_time(args: argparse.Namespace) -> dict[str, str]:
    """Where a candidate changes TileLang (its packages) and the gfx942 toolchain that
    compiles its HIP source at once, both make a TileLang kernel's gfx942 code: each is
    judged alone first (its own run, beside the run's folder), and each kernel's line then
    says what each did alone. {kernel key (``codegen.Kernel.key``): that note}."""
    packages = [*(["--tilelang", args.tilelang] if args.tilelang else []),
                *(["--site", str(args.site)] if args.site else [])]
    if not (packages and args.rocm_toolchain) or args.base_pins:
        return {}
    common = ["--repo", str(args.repo), "--commit", args.head, *(f"-b{b}" for b in args.bench),
              *(["--machine", args.machine] if args.machine else []),
              *(["--find-links", str(args.find_links)] if args.find_links else [])]
    alone = {}
    for name, own in (("packages", [*packages, *(["--triton", args.triton]
                                                  if args.triton else [])]),
                      ("toolchain", ["--rocm-toolchain", *args.rocm_toolchain])):
        folder = args.pr_dir.with_name(f"{args.pr_dir.name}-alone-{name}")
        main([*common, *own, "--pr-dir", str(folder), "--out", str(folder)])
        alone[name] = _lines_of(folder / "gate.json")
    notes: dict[str, list[str]] = {}
    for name in ("packages", "toolchain"):
        label, lines = alone[name]
        for key, line in lines.items():
            notes.setdefault(key, []).append(f"{label}: {line}")
    return {key: "one at a time: " + "; ".join(parts) for key, parts in notes.items()}


def _lines_of(report: Path) -> tuple[str, dict[str, str]]:
    """(what the run's head was, {kernel key: its line less the kernel's name}) of a
    report; a run that failed says so for every kernel."""
    try:
        data = json.loads(report.read_text())
        label = data["stacks"]["head"]["label"]
    except (OSError, ValueError, KeyError, TypeError):
        return "a component alone", {}
    out = {}
    for group in data.get("codegen") or []:
        chain = str(group.get("toolchain") or "").split(" → ")[0]
        for kernel in group.get("kernels") or []:
            if kernel.get("backend") == "tilelang" and str(group.get("target")).startswith("gfx"):
                body = str(kernel.get("line") or "").split(": ", 1)[-1]
                out[f"{group['target']}|{kernel['kernel']}|{chain}"] = body
    return label, out


def newest(args: argparse.Namespace) -> list[str]:
    """Set ``--triton``/``--tilelang`` to each newest release on the index that is newer
    than this interpreter's; what was found, as lines to print."""
    from kperf.stacks.matrix import MatrixError, pip_report

    if args.triton or args.tilelang or args.site or args.base_pins:
        raise UpgradeError("--newest finds the candidate itself: no --triton, --tilelang, "
                           "--site or --base-pins with it")
    pinned, said = pinned_versions(), []
    for name in ("triton", "tilelang"):
        try:
            found = str(pip_report(name)["version"])
        except (MatrixError, KeyError) as err:
            raise UpgradeError(f"--newest: the index does not say {name}'s newest: {err}") \
                from err
        if found != pinned.get(name):
            setattr(args, name, found)
        said.append(f"{name}: pinned {pinned.get(name, 'none')}, newest {found}")
    return said


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.newest and not (args.no_run or args.resume):
        try:
            said = newest(args)
        except UpgradeError as err:
            print(f"kperf upgrade: {err}", file=sys.stderr)
            return EXIT_GATE_ERROR
        print("kperf upgrade: " + "; ".join(said))
        if not (args.triton or args.tilelang):
            print("kperf upgrade: the pins are the newest releases: nothing to judge")
            return 0
    args.pr_dir = (args.pr_dir or run_dir(args)).resolve()
    args.config = args.thresholds = args.main_branch = None
    args.label = "before you upgrade"  # a failure's title; a run's is its candidate
    if not args.bench:
        args.bench = [r"(Registers|Scratch|SharedMem|Occupancy|CodeSize)\.track_value",
                      r"Compile\.track_compile"]
    args.components = {} if args.no_run or args.resume else one_at_a_time(args)
    return gate_cli.run(args, upgrade_plan)


if __name__ == "__main__":
    raise SystemExit(main())
