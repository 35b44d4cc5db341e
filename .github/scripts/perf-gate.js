// The trusted half of the PR performance gate (.github/workflows/perf-gate-run.yml).
// Loaded by actions/github-script from a checkout of the default branch, never from the
// pull request; tests/test_gate_workflow_scripts.py runs these functions under node.
'use strict';

const MARKER = '<!-- kperf-gate -->';
const MAX_REPORT = 30000; // characters per runner label in the comment
const MAX_JSON = 16 * 1024 * 1024; // gate.json read for its cases' verdicts, no larger
const FORK_ENVIRONMENT = 'perf-gate-fork';

// The gate's exit codes (docs/security.md): what each one means for the commit status.
// Anything else (docker's 125-127, 137 for a kill, a missing code) is the gate itself
// failing, never a regression and never a pass.
// An undecided verdict because another process shared the GPU (``neighbour``, from the
// report: a case INCONCLUSIVE with attribution "process") is not a pass: nothing was judged.
function verdict(code, neighbour = false) {
  const text = code === undefined || code === null ? '' : String(code).trim();
  const rc = /^[0-9]{1,3}$/.test(text) ? Number(text) : null;
  switch (rc) {
    case 0: return { state: 'success', level: 'pass', text: 'pass (exit 0)' };
    case 3: return neighbour
      ? { state: 'error', level: 'neighbour',
        text: 'inconclusive (exit 3): another process used the GPU while it measured; '
          + 'run the gate again on a GPU of its own' }
      : { state: 'success', level: 'warning',
        text: 'inconclusive or no baseline (exit 3): a warning, not a failure' };
    case 1: return { state: 'failure', level: 'regression',
      text: 'performance regression (exit 1): a case is SLOW' };
    case 2: return { state: 'failure', level: 'broken',
      text: 'a benchmark broke (exit 2)' };
    case 4: return { state: 'failure', level: 'gate-failed',
      text: 'the gate itself failed (exit 4): not a performance regression' };
    default: return { state: 'failure', level: 'gate-failed',
      text: rc === null ? 'the gate itself failed: it left no exit code (not run or killed)'
        : `the gate itself failed (exit ${rc}): not a performance regression` };
  }
}

// Whether the report (gate.json, untrusted text: parsed, never run) holds a case left
// undecided by another process on the GPU.
function neighbourIn(reportJson) {
  try {
    const rep = JSON.parse(reportJson);
    return Array.isArray(rep.cases) && rep.cases.some((c) => c !== null
      && typeof c === 'object' && c.verdict === 'INCONCLUSIVE' && c.attribution === 'process');
  } catch (e) {
    return false;
  }
}

// Defence in depth: the report was written by the pull request's code, so it is untrusted
// text. No HTML (every < > and bare & becomes an entity; character references the gate
// wrote to escape table cells stay as they are); no links, images, footnotes or reference
// definitions (every [ and ] becomes an entity, so `[x]: //evil.example` defines nothing and
// `[see][x]` links nowhere); no autolinks; no headings (a line the PR printed must not pass
// for the verdict this workflow writes above it); no @-mentions or #-references that would
// notify people; no control, bidirectional or invisible characters (U+202E would show the
// text reordered); bounded length.
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

// a line's quote and list markers, then a heading's #s
const LINE_START_HEADING = /^((?:[ \t]*(?:&gt;|[-*+](?=[ \t])|[0-9]{1,9}[.)](?=[ \t])))*[ \t]*)(#{1,6})(?=[ \t]|$)/gm;

function sanitize(text, limit = MAX_REPORT) {
  let out = String(text)
    .replace(/\r\n?/g, '\n')
    .replace(HIDDEN, '')
    .split(MARKER).join('');
  if (out.length > limit) out = out.slice(0, limit) + '\n\n… (report cut; the full one is in the artifact)';
  return out
    .replace(/&(?!#[0-9]{1,7};|#x[0-9a-fA-F]{1,6};|[a-zA-Z][a-zA-Z0-9]{1,31};)/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/\\?\[/g, '&#91;')              // links, images, footnotes, reference definitions
    .replace(/\\?\]/g, '&#93;')
    .replace(LINE_START_HEADING, '$1\\$2')  // ATX headings, in quotes and lists too
    .replace(/^([ \t]*)(=+|-+)([ \t]*)$/gm, '$1\\$2$3')                  // setext underlines
    .replace(/([a-zA-Z][a-zA-Z0-9+.-]*):\/\//g, '$1:/\u200b/') // autolinked URLs
    .replace(/\bwww\./gi, 'www\u200b.')
    .replace(/@/g, '@\u200b')                 // mentions, team mentions
    .replace(/(?<!&)#(?=[0-9])/g, '#\u200b')   // issue / PR references (not &#124;)
    .replace(/\b(GH-[0-9])/gi, (m) => m[0] + '\u200b' + m.slice(1));
}

function commentBody(sections) {
  const parts = [MARKER];
  for (const s of sections) {
    const v = verdict(s.code);
    parts.push(`#### perf gate (${s.label}): ${v.text}`);
    parts.push(s.report ? sanitize(s.report) : '_no report was produced; see the job log._');
  }
  return parts.join('\n\n');
}

function ownerRepo(context) {
  return { owner: context.repo.owner, repo: context.repo.repo };
}

// Which pull request a stage-1 run was for, checked against the API, never taken from
// anything the pull request produced. Outputs: pr, head_sha, base_ref, fork, author.
async function authorize({ github, context, core, env }) {
  const run = context.payload.workflow_run;
  const repo = ownerRepo(context);
  const headSha = run.head_sha;
  const headRepo = run.head_repository.full_name;
  let candidates = (run.pull_requests || []).map((p) => p.number);
  if (candidates.length === 0) { // a fork's pull request is not listed in the event
    const { data } = await github.rest.pulls.list({
      ...repo, state: 'open', head: `${run.head_repository.owner.login}:${run.head_branch}` });
    candidates = data.map((p) => p.number);
  }
  for (const number of candidates) {
    const { data: pull } = await github.rest.pulls.get({ ...repo, pull_number: number });
    if (pull.head.sha !== headSha || pull.head.repo.full_name !== headRepo
        || pull.base.repo.full_name !== `${repo.owner}/${repo.repo}` || pull.state !== 'open') {
      continue;
    }
    if (!/^[A-Za-z0-9._/-]{1,200}$/.test(pull.base.ref) || pull.base.ref.includes('..')) {
      core.setFailed(`PR #${number}: base branch name ${JSON.stringify(pull.base.ref)} refused`);
      return null;
    }
    const fork = headRepo !== `${repo.owner}/${repo.repo}`;
    const out = { pr: String(number), head_sha: headSha, base_ref: pull.base.ref,
      fork: String(fork), author: pull.user.login };
    for (const [k, v] of Object.entries(out)) core.setOutput(k, v);
    for (const { label } of reportDirs(env)) {
      await github.rest.repos.createCommitStatus({ ...repo, sha: headSha, state: 'pending',
        context: `perf-gate (${label})`,
        description: label === env.CODEGEN_LABEL ? 'the CPU runner judged it; posted with '
          + 'the GPU results' : fork ? 'waiting for a maintainer to approve the GPU run'
          : 'queued' });
    }
    return out;
  }
  core.setFailed(`no open pull request of ${headRepo} has head ${headSha}; nothing to measure`);
  return null;
}

// Runs in the job that carries the environment. For a fork, the environment must really
// have been approved, by someone other than the author: if its required reviewers were
// removed by mistake, this refuses to let fork code reach the GPU runners.
async function checkApproval({ github, context, core, env }) {
  if (env.FORK !== 'true') { core.info('same-repository branch: no approval needed'); return true; }
  const { data: reviews } = await github.rest.actions.getReviewsForRun({
    ...ownerRepo(context), run_id: context.runId });
  const ok = reviews.some((r) => r.state === 'approved'
    && (r.environments || []).some((e) => e.name === FORK_ENVIRONMENT)
    && r.user && r.user.login !== env.PR_AUTHOR);
  if (!ok) {
    core.setFailed(`fork pull request without an approval of the ${FORK_ENVIRONMENT} `
      + 'environment by a maintainer other than its author: give the environment required '
      + 'reviewers (docs/security.md); refusing to run fork code on GPU runners');
  }
  return ok;
}

// Each section's label and the folder its artifact was downloaded to: the GPU gate jobs' of
// this run, then the CPU codegen job's of the triggering run (stage 1), kept apart so that
// stage 1, which a pull request can edit, can never fill a GPU section.
function reportDirs(env) {
  const dirs = JSON.parse(env.GATE_LABELS).map((label) => (
    { label, dir: ['reports', `gate-report-${label}`] }));
  if (env.CODEGEN_LABEL) {
    dirs.push({ label: env.CODEGEN_LABEL,
      dir: ['reports-stage1', `gate-report-${env.CODEGEN_LABEL}`] });
  }
  return dirs;
}

// Commit status per runner label and one comment, from the artifacts of the gate jobs.
async function report({ github, context, core, env, fs, path }) {
  const repo = ownerRepo(context);
  const sections = [];
  for (const { label, dir: parts } of reportDirs(env)) {
    const dir = path.join(...parts);
    const read = (name, limit = 2 * MAX_REPORT) => {
      const file = path.join(dir, name);
      try {
        const st = fs.lstatSync(file);
        return st.isFile() && st.size <= MAX_JSON ? fs.readFileSync(file, 'utf8').slice(0, limit)
          : null;
      } catch (e) { return null; }
    };
    const code = read('exit_code');
    const v = verdict(code, neighbourIn(read('gate.json', MAX_JSON)));
    sections.push({ label, code, report: read('gate.md') });
    await github.rest.repos.createCommitStatus({ ...repo, sha: env.HEAD_SHA, state: v.state,
      context: `perf-gate (${label})`, description: v.text.slice(0, 140),
      target_url: `${context.serverUrl}/${repo.owner}/${repo.repo}/actions/runs/${context.runId}` });
    if (v.state !== 'success') core.warning(`perf gate (${label}): ${v.text}`);
  }
  const body = commentBody(sections);
  const pr = Number(env.PR);
  const comments = await github.paginate(github.rest.issues.listComments,
    { ...repo, issue_number: pr });
  const mine = comments.find((c) => c.user && c.user.login === 'github-actions[bot]'
    && c.body.startsWith(MARKER));
  if (mine) {
    await github.rest.issues.updateComment({ ...repo, comment_id: mine.id, body });
  } else {
    await github.rest.issues.createComment({ ...repo, issue_number: pr, body });
  }
  return body;
}

module.exports = { MARKER, verdict, neighbourIn, sanitize, commentBody, reportDirs, authorize,
  checkApproval, report };
