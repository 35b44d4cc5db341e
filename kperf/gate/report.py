"""gate.md (the PR comment) and gate.json (for machines), from the verdicts.

Every string that comes from a file, a machine or a commit (case names, parameters,
reasons, labels, base and head) is escaped before it enters Markdown: a ``|`` would split a
table row, a backtick or ``<`` would start code or HTML, a control or bidirectional
character (U+202E) would make the text read otherwise than it is (docs/gate.md, "Output").
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kperf.gate.disturbed import host_behind, round_note
from kperf.gate.errors import STATUS, GateError
from kperf.gate.look import log_ratio_groups
from kperf.gate.model import CaseData, Verdict, method_note

REPORT_SCHEMA = "kperf-gate-2"
COMMENT_MARKER = "<!-- kperf-gate -->"
_ORDER = {"SLOW": 0, "INCONCLUSIVE": 1, "SAME": 2, "FAST": 3}
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
# control characters, and the marks that reorder or hide text (U+200B-U+200F, U+202A-U+202E,
# U+2066-U+2069, U+061C, U+FEFF): a reader would see another text than the one written
_HIDDEN = re.compile("[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff]+")
_COMMIT = re.compile(r"[0-9a-f]{4,64}")


def md(text: Any) -> str:
    """Text safe inside a Markdown table cell: no HTML, no formatting, no new rows, no
    hidden or reordering characters."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _HIDDEN.sub(" ", text)
    return _MARKDOWN.sub(r"\\\1", text).replace("@", "&#64;")


def commit(text: Any, length: int = 10) -> str:
    """A commit id as code; anything else that came as one, escaped as text."""
    short = str(text)[:length]
    return f"`{short}`" if _COMMIT.fullmatch(short) else md(short)


def worst_first(verdicts: Sequence[Verdict]) -> list[Verdict]:
    def order(v: Verdict) -> tuple:
        badness = v.ratio if v.ratio is not None else 0.0
        if v.higher_is_better and v.ratio:
            badness = 1.0 / v.ratio
        return (_ORDER[v.verdict], not v.broke, -badness, v.case)

    return sorted(verdicts, key=order)


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "seconds":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= scale or name == "ns":
                return f"{value / scale:.3g} {name}"
    if float(value).is_integer():
        return f"{int(value)} {md(unit)}".strip()
    return f"{value:.4g} {md(unit)}".strip()


def fmt_ratio(v: Verdict) -> str:
    if v.ratio is None:
        return "—"
    return f"{v.ratio:.3f}x" + (f" [{v.ci[0]:.3f}, {v.ci[1]:.3f}]" if v.ci else "")


def fmt_clocks(v: Verdict) -> str:
    if v.clock_base_mhz is None or v.clock_head_mhz is None:
        return "—"
    text = f"{v.clock_base_mhz:.0f} → {v.clock_head_mhz:.0f} MHz"
    return text + (" (code)" if v.attribution == "code" else
                   " (another process)" if v.attribution == "process" else
                   " (outside)" if v.attribution == "environment" else "")


def fmt_rounds(v: Verdict) -> str:
    if not v.rounds:
        return "—"
    return f"{v.rounds} ({v.rounds_again} again)" if v.rounds_again else str(v.rounds)


def fmt_verdict(v: Verdict) -> str:
    text = "**BROKEN**" if v.broke else f"**{v.verdict}**"  # failed, crashed or wrong at head
    reason = "; ".join(r for r in (v.reason, _class_note(v), _method_note(v)) if r)
    return f"{text}: {md(reason)}" if reason else text


def _class_note(v: Verdict) -> str:
    if not v.rule_class:
        return ""
    return f"at the power cap: judged as {v.klass}, not {v.rule_class}"


def _method_note(v: Verdict) -> str:
    return method_note(*v.methods, ("at base", "at head"), "change") if v.methods else ""


def _moved(verdicts: Sequence[Verdict], verdict: str, word: str) -> str:
    """``3 faster (3 of them static figures)``: a register count or an occupancy that moved
    is not a timing, and a reader of "1 slower, 3 faster" would take it for one."""
    moved = [v for v in verdicts if v.verdict == verdict]
    static = sum(v.unit != "seconds" for v in moved)
    return f"{len(moved)} {word}" + (f" ({static} of them static figures)" if static else "")


def summary_line(verdicts: Sequence[Verdict], code: int) -> str:
    counts = {k: sum(v.verdict == k and not v.broke for v in verdicts) for k in _ORDER}
    broke = sum(v.broke for v in verdicts)
    unchanged = sum(v.unchanged for v in verdicts)
    same = f"{counts['SAME']} same" + (f" ({unchanged} of them not measured: code unchanged)"
                                       if unchanged else "")
    parts = [_moved(verdicts, "SLOW", "slower"), _moved(verdicts, "FAST", "faster"), same,
             f"{counts['INCONCLUSIVE']} inconclusive"] + ([f"{broke} broken"] if broke else [])
    return f"**{STATUS[code]}** (exit {code}): " + ", ".join(parts) + f" of {len(verdicts)} cases"


def table_lines(verdicts: Sequence[Verdict], multi_env: bool, max_rows: int = 60,
                json_name: str = "gate.json") -> list[str]:
    """The verdict table, worst case first."""
    lines = ["| case | before | after | ratio [interval] | clocks | rounds | verdict |",
             "|---" * 7 + "|"]
    rows = worst_first(verdicts)
    for v in rows[:max_rows]:
        name = f"{v.case} [{v.env}]" if multi_env else v.case
        lines.append(f"| {md(name)} | {fmt_value(v.before, v.unit)} | "
                     f"{fmt_value(v.after, v.unit)} | {fmt_ratio(v)} | {fmt_clocks(v)} | "
                     f"{fmt_rounds(v)} | {fmt_verdict(v)} |")
    if len(rows) > max_rows:
        lines.append(f"\n… and {len(rows) - max_rows} more rows in {json_name}.")
    return lines


def markdown(verdicts: Sequence[Verdict], code: int, info: dict[str, Any], max_rows: int = 60,
             sections: Sequence[str] = ()) -> str:
    """The PR comment: the summary, how it was judged, ``sections`` (already Markdown:
    the generated code's, kperf/gate/codegen.py), then the table of the measured cases;
    the cases left unmeasured (their kernel's code the same at base and head) are counted
    under it, and listed in gate.json."""
    title = (("### Before you upgrade" if info.get("stacks") else "### Performance gate")
             + (f" — {md(info['label'])}" if info.get("label") else ""))
    how = (f"{sides(info)}; {info['design']}. False alarms: at most "
           f"{info['alpha']} over the whole run ({info['correction']} over cases, "
           f"spent over looks); a SAME misses a change at its threshold at most "
           f"{info['beta']} of the time.")
    lines = [COMMENT_MARKER, title, "", summary_line(verdicts, code), "", how, "", *sections]
    measured = [v for v in verdicts if not v.unchanged]
    if measured:
        lines += table_lines(measured, bool(info.get("multi_env")), max_rows)
    quiet = len(verdicts) - len(measured)
    if quiet:
        lines += ["", f"{quiet} case(s) not measured: their kernel's code is the same at base "
                      f"and head (SAME; listed in gate.json)."]
    return "\n".join(lines) + "\n"


def sides(info: dict[str, Any]) -> str:
    """What was set against what, and where: two commits, or (an upgrade report) two
    stacks at one commit."""
    where = f"on {md(info['machine'])}"
    stacks = info.get("stacks")
    if stacks:
        return (f"commit {commit(info['head'])} {where}: {md(stacks['base']['label'])} (base) "
                f"→ {md(stacks['head']['label'])} (head)"
                + (f" ({md(info['base_how'])})" if info.get("base_how") else ""))
    return (f"base {commit(info['base'])} ({md(info['base_how'])}) → head "
            f"{commit(info['head'])} {where}")


def report_json(verdicts: Sequence[Verdict], code: int, info: dict[str, Any]) -> dict[str, Any]:
    return {"schema": REPORT_SCHEMA, "exit_code": code, "status": STATUS[code],
            "summary": summary_line(verdicts, code), **info,
            "cases": [v.as_dict() for v in worst_first(verdicts)]}


def write(out_dir: Path, text: str, report: dict[str, Any]) -> None:
    """gate.json and gate.md, each whole or not at all."""
    from kperf.core.record import atomic_write_json

    path = out_dir / "gate.json"
    try:
        atomic_write_json(path, report)
    except OSError as err:
        raise GateError(f"{path}: cannot be written ({err.strerror or err})") from err
    write_text(out_dir / "gate.md", text)


def write_text(path: Path, text: str) -> None:
    """``path`` whole or not at all; a failure (a full disk) is a ``GateError`` naming it."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as err:
        raise GateError(f"{path}: cannot be written ({err.strerror or err})") from err
    finally:
        tmp.unlink(missing_ok=True)


def write_failure(out_dir: Path, message: str, code: int, label: str) -> None:
    """A report that says the gate could not decide, and why (never a blank comment)."""
    title = "### Performance gate" + (f" — {md(label)}" if label else "")
    text = f"{COMMENT_MARKER}\n{title}\n\n**{STATUS[code]}** (exit {code}): {md(message)}\n"
    write(out_dir, text, {"schema": REPORT_SCHEMA, "exit_code": code, "status": STATUS[code],
                          "error": message, "label": label, "cases": []})


def rounds_markdown(cases: Sequence[CaseData], verdicts: Sequence[Verdict],
                    behind_share: float, placed: frozenset[str] = frozenset()) -> str:
    """rounds.md: each timed case's rounds, head over base, in measuring order; what a
    reader checks a verdict by (an INCONCLUSIVE says which rounds disagreed). A case of a
    class in ``placed`` (``level_by_placement``) shows its rounds as the verdict took
    them: its placed copies compared mode by mode (``look.log_ratio_groups``), not by the
    trials' median."""
    lines = ["# Rounds of each timed case", "",
             "head / base - 1 per round, in %; *again*: the round was measured a second time "
             "(a block of its first try was disturbed, docs/gate.md); *re*: measured by a "
             "fresh pair to confirm a SLOW or FAST; *host behind*: in at least "
             f"{behind_share:.0%} of a block's trials the GPU waited for the host, so the "
             "events timed the launches too; spread: the median sd of a block's trials.",
             "", "| case | verdict | rounds | spread |", "|---|---|---|---|"]
    verdict = {v.case: v for v in verdicts}
    for data in cases:
        v, main = verdict.get(data.name), data.pairs()
        if v is None or not main or not main[0][0].samples:
            continue
        used = main[:v.rounds] + data.pairs(confirm=True)
        cells = []
        ratios = log_ratio_groups([used], by_placement=v.klass in placed)[0]
        for (base, head), log_ratio in zip(used, ratios, strict=True):
            note = " (again)" if head.retry or base.retry else ""
            note += " (re)" if head.confirm else ""
            note += round_note(data, base, head)
            note += (" (host behind)" if any(host_behind(b) >= behind_share > 0
                                             for b in (base, head)) else "")
            cells.append(f"{100 * (math.exp(log_ratio) - 1):+.2f}{note}")
        if len(main) > v.rounds:
            cells.append(f"{len(main) - v.rounds} more after the verdict, not used")
        spread = statistics.median(b.spread() for pair in used for b in pair)
        lines.append(f"| {md(data.name)} | {v.verdict} | {', '.join(cells)} | "
                     f"{100 * spread:.2f}% |")
    return "\n".join(lines) + "\n"


