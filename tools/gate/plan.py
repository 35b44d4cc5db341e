"""What a gate run is, and its two sides: the plan (commits, cases, GPU lanes) that
``gate-state.json`` records, and each side's ``kernels`` package built from its commit
exactly as asv builds it (``pip wheel`` of the commit's tree), installed into its own
folder under the PR folder, so both live at once (tools/gate/measure.py measures them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.record import atomic_write_json
from tools.gate.errors import EXIT_INCONCLUSIVE, GateError
from tools.gate.model import SIDES

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
    cases: list[dict[str, Any]]  # from benchmarks._suites.gate_cases(), selected
    lanes: list[Lane]
    label: str = ""

    def state(self) -> dict[str, Any]:
        return {"schema": STATE_SCHEMA, "base": self.base, "head": self.head,
                "base_how": self.base_how, "machine": self.machine, "cases": self.cases,
                "lanes": [asdict(lane) for lane in self.lanes], "label": self.label}


def write_state(pr_dir: Path, state: dict[str, Any]) -> None:
    atomic_write_json(pr_dir / "gate-state.json", state)


def build_side(repo: Path, sha: str, dest: Path) -> Path:
    """``kernels`` of ``sha`` built as asv builds it, installed into ``dest/site``."""
    site, done = dest / "site", dest / ".built"
    if done.exists():
        return site
    shutil.rmtree(dest, ignore_errors=True)
    src, wheels = dest / "src", dest / "wheels"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=repo,
                             capture_output=True)
    if archive.returncode != 0:
        raise GateError(f"git archive {sha[:12]}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _pip(sha, [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
               str(wheels), str(src)])
    _pip(sha, [*pip, "install", "--no-deps", "--no-index", "--target", str(site),
               *map(str, sorted(wheels.glob("*.whl")))])
    done.write_text(sha)
    return site


def _pip(sha: str, command: list[str]) -> None:
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise GateError(f"building {sha[:12]} failed: pip {command[5]}: "
                        f"{out.stderr.strip()[-800:]}", EXIT_INCONCLUSIVE)


def stack_path(repo: Path) -> list[str]:
    """This interpreter's imports without the repository (whose ``kernels`` is neither side)."""
    skip = {str(repo.resolve()), "", os.getcwd()}
    return [p for p in sys.path if p not in skip and str(Path(p).resolve()) not in skip]


def scratch_dir(plan: GatePlan, fresh: bool) -> None:
    """The PR folder: deleted (only if it is the gate's own) and made again, unless
    resuming. Never the results, records or site (tools/paths.py)."""
    from tools.gate.asvio import load_project_conf
    from tools.paths import kept_paths, make_scratch, remove_scratch

    keep = kept_paths(plan.repo, load_project_conf(plan.repo / "asv.conf.json"))
    if fresh:
        remove_scratch(plan.pr_dir, keep, "--pr-dir", own_files=("gate-state.json",),
                       not_above=[plan.repo])
    make_scratch(plan.pr_dir, keep, "--pr-dir", not_above=[plan.repo])


def sites_for(plan: GatePlan) -> dict[str, Path]:
    return {side: build_side(plan.repo, getattr(plan, side), plan.pr_dir / "sides" /
                             getattr(plan, side)[:12]) for side in SIDES}
