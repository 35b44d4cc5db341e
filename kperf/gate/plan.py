"""What a gate run is, and its two sides: the plan (commits, cases, GPU lanes) that
``gate-state.json`` records, and each side's code under test built from its commit
exactly as asv builds it (kperf/suites/build.py), installed into its own folder under
the PR folder, so both live at once (kperf/gate/measure.py measures them).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kperf import project
from kperf.core.record import atomic_write_json
from kperf.gate.errors import EXIT_INCONCLUSIVE, GateError
from kperf.gate.model import SIDES
from kperf.ops.files import digest_files, op_files, package_files
from kperf.specs import GateCase

STATE_SCHEMA = "kperf-gate-state-2"


@dataclass
class Lane:
    """One GPU: the environment that makes only it visible, and the cases it judges."""

    label: str = "gpu"
    env: dict[str, str] = field(default_factory=dict)
    cases: list[str] = field(default_factory=list)


@dataclass
class GatePlan:
    repo: Path
    pr_dir: Path
    base: str
    head: str
    base_how: str
    machine: str
    cases: list[GateCase]  # from kperf.suites.timed.gate_cases(), selected
    lanes: list[Lane]
    label: str = ""
    ops: list[str] = field(default_factory=list)  # every op of the suite (``code_digest``)
    every_case: bool = False  # measure the cases of unchanged kernels too
    # {target/backend[/toolchain]: why this machine cannot build it}: cases left out
    not_here: dict[str, str] = field(default_factory=dict)
    # an upgrade report (kperf/stacks/upgrade.py): {side: its stack}, one commit on both
    # sides, each side's compilers its stack's ("site": packages put first on its path)
    stacks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def state(self) -> dict[str, Any]:
        return {"schema": STATE_SCHEMA, "base": self.base, "head": self.head,
                "base_how": self.base_how, "machine": self.machine, "cases": self.cases,
                "lanes": [asdict(lane) for lane in self.lanes], "label": self.label,
                "ops": self.ops, "every_case": self.every_case, "not_here": self.not_here,
                **({"stacks": self.stacks} if self.stacks else {})}

    def stack_site(self, side: str) -> list[str]:
        """The folder a side's stack puts before the interpreter's packages, if any."""
        site = self.stacks.get(side, {}).get("site")
        return [site] if site else []

    def without_kernels(self, keys: Collection[str]) -> GatePlan:
        """This plan less the cases whose kernel (``kernel_key``) is in ``keys``."""
        kept = [c for c in self.cases if kernel_key(c) not in keys]
        names = {c["name"] for c in kept}
        lanes = [Lane(lane.label, lane.env, [n for n in lane.cases if n in names])
                 for lane in self.lanes]
        return replace(self, cases=kept, lanes=[lane for lane in lanes if lane.cases])


def case_op(case: GateCase) -> str:
    return str(case.get("spec", {}).get("op", ""))


# The backends with modules of their own in an op folder: ``<package>/<op>/<backend>_*.py``
# (kperf/ops/op.py ``op_from_modules``); the rest of the folder (spec, reference, inputs) and
# the shared modules of the package are every backend's.
COMPILED_BACKENDS = ("tilelang", "triton")


def kernel_key(case: GateCase) -> str:
    """``op/backend`` of a case of a compiled backend, else ``op``: what a case runs from
    its side (``code_digest``), and so what is compared for "code unchanged"."""
    backend = case.get("spec", {}).get("backend")
    return f"{case_op(case)}/{backend}" if backend in COMPILED_BACKENDS else case_op(case)


def code_digest(site: Path, op: str, ops: Collection[str], backend: str | None = None,
                proj: project.Project | None = None) -> str:
    """What a case of ``op`` (of ``backend``, if given) runs from its side's installed
    code: the files kperf/ops/files.py names for it (its op folder, the package's shared
    modules, what it imports of other ops; where the ops track a library, all of it),
    less its other compiled backends' modules."""
    proj = proj or project.find()
    digest = hashlib.sha256()
    for package in proj.code_packages():
        root = site / package
        if not root.is_dir():  # a tracker's own ops: the working tree's, the same each side
            continue
        if package != proj.ops:
            digest_files(digest, root, package_files(root))
            continue
        others = tuple(f"{b}_" for b in COMPILED_BACKENDS if backend and b != backend)
        folder = root / op
        skip = [p for p in folder.glob("*.py") if others and p.name.startswith(others)]
        digest_files(digest, root, op_files(root, package, op, ops, skip))
    return digest.hexdigest()[:20]


def unchanged_kernels(plan: GatePlan, sites: dict[str, Path]) -> dict[str, str]:
    """{kernel_key: its code's digest} for the planned kernels whose code is byte for byte
    the same at base and head: an op, or one compiled backend of it (an edit of an op's
    TileLang kernel leaves its Triton kernel's cases unmeasured). One instrument (this
    checkout's suite and harness) measures both sides on one stack, so their cases could
    differ by noise alone."""
    out = {}
    for key in sorted({kernel_key(c) for c in plan.cases} - {""}):
        op, _, backend = key.partition("/")
        base, head = (code_digest(sites[side], op, plan.ops, backend or None,
                                  project.of(plan.repo)) for side in SIDES)
        if base == head:
            out[key] = base
    return out


def write_state(pr_dir: Path, state: dict[str, Any]) -> None:
    atomic_write_json(pr_dir / "gate-state.json", state)


def build_side(repo: Path, sha: str, dest: Path) -> Path:
    """The code under test of ``sha`` built as asv builds it (kperf/suites/build.py),
    installed into ``dest/site``. A build cut off before the end is deleted (it is the
    gate's own scratch: kperf/paths.py) and made again."""
    from kperf.paths import make_scratch, remove_scratch
    from kperf.suites.build import BuildError, build_wheel

    site, done = dest / "site", dest / ".built"
    if done.exists():
        return site
    keep = kept_paths_of(repo)
    remove_scratch(dest, keep, "side folder", not_above=[repo])
    make_scratch(dest, keep, "side folder", not_above=[repo])
    src, wheels = dest / "src", dest / "wheels"
    src.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=project.of(repo).git_repo,
                             capture_output=True)
    if archive.returncode != 0:
        raise GateError(f"git archive {sha[:12]}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    try:
        wheel = build_wheel(project.of(repo), src, wheels)
    except BuildError as err:
        raise GateError(f"building {sha[:12]} failed: {err}", EXIT_INCONCLUSIVE) from err
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _pip(sha, [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)])
    done.write_text(sha)
    return site


def _pip(sha: str, command: list[str]) -> None:
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise GateError(f"building {sha[:12]} failed: pip {command[5]}: "
                        f"{out.stderr.strip()[-800:]}", EXIT_INCONCLUSIVE)


def stack_path(repo: Path) -> list[str]:
    """This interpreter's imports without the repository (whose code is neither side)."""
    skip = {str(repo.resolve()), "", os.getcwd()}
    return [p for p in sys.path if p not in skip and str(Path(p).resolve()) not in skip]


def kept_paths_of(repo: Path) -> dict[str, Path]:
    """What no folder the gate deletes may overlap (kperf/paths.py ``kept_paths``)."""
    from kperf.gate.asvio import load_project_conf
    from kperf.paths import kept_paths

    return kept_paths(repo, load_project_conf(repo / "asv.conf.json"))


def scratch_dir(plan: GatePlan, fresh: bool) -> None:
    """The PR folder: deleted (only if it is the gate's own) and made again, unless
    resuming. Never the results, records or site (kperf/paths.py)."""
    from kperf.paths import make_scratch, remove_scratch

    keep = kept_paths_of(plan.repo)
    if fresh:
        remove_scratch(plan.pr_dir, keep, "--pr-dir", own_files=("gate-state.json",),
                       not_above=[plan.repo])
    make_scratch(plan.pr_dir, keep, "--pr-dir", not_above=[plan.repo])


def sites_for(plan: GatePlan) -> dict[str, Path]:
    """Each side's installed ``kernels``, in ``<pr-dir>/sides/<commit[:12]>``: a commit
    id that is not a plain name (gate-state.json is checked for hex ids; this is the
    last guard) cannot lead the build, or its deletion, out of the PR folder."""
    from kperf.paths import inside

    sides = plan.pr_dir / "sides"
    return {side: build_side(plan.repo, getattr(plan, side),
                             inside(sides, getattr(plan, side)[:12], what=f"{side} commit"))
            for side in SIDES}
