"""What the workflow tests share: the three workflows read as data, one step's script, and
bash to run it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
GATE, RUN, NIGHTLY = "perf-gate.yml", "perf-gate-run.yml", "perf-nightly.yml"


def _files() -> list[Path]:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} == {GATE, RUN, NIGHTLY}, files
    return files


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _jobs() -> list[tuple[str, str, dict]]:
    return [(f.name, name, job) for f in _files() for name, job in _load(f.name)["jobs"].items()]


def _step(workflow: str, job: str, name: str) -> dict:
    steps = _load(workflow)["jobs"][job]["steps"]
    return next(s for s in steps if s.get("name") == name)


def _bash(script: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], env={**os.environ, **env},
                          capture_output=True, text=True, cwd=cwd, timeout=60)
