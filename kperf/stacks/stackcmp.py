"""Stack comparison: one commit under stack X (base) against stack Y (head).

    kperf compare-stacks --results .asv/matrix/results \\
        --base triton=3.7.1 --head triton=3.8.0
    kperf compare-stacks --results .asv/matrix/results \\
        --base env-KPERF_ROCM_TOOLCHAIN=rocm-6.4.4 --head env-KPERF_ROCM_TOOLCHAIN=rocm-7.2.2
    kperf compare-stacks \\
        --base machine=mi300x-rocm6.3-torch2.6-triton3.2-tilelang0.1.15 \\
        --head machine=mi300x-rocm6.4-torch2.7-triton3.3-tilelang0.1.15

A stack is chosen by KEY=VALUE[,KEY=VALUE...] over what each asv results file records:
its ``params`` (machine-file keys such as rocm/torch/triton/tilelang/gpu, ``python``, and
the environment's pip pins), its environment variables as ``env-NAME`` (the gfx942
toolchain of ``kperf.stacks.matrix pip --rocm-toolchain``: ``env-KPERF_ROCM_TOOLCHAIN``), plus
``machine`` (the results folder) and ``env`` (the asv environment name). Each side must
select exactly one results file of the commit in every results directory given; several
``--results`` directories are several rounds.

The verdicts, report and exit codes are the PR gate's (kperf/gate): SLOW, FAST, SAME or
INCONCLUSIVE per case, each results folder a round (both stacks in it, as
``kperf.stacks.matrix`` measures them, round by round), looks after each round, a suite-wide
false-alarm correction, per-class thresholds from thresholds.json, and the gate's rule
for clock differences (the code's at the power limit, else cycles must agree). The runs
are read as stored: nothing is re-measured, so a flagged case is final here. Writes
``stackcmp.md`` and ``stackcmp.json``.

Exit codes: as the gate: 4 the comparison itself failed (unreadable input), 2 broken (a
case failed on the head stack, or it has no results), 1 regression (a case is SLOW), 3
inconclusive or no baseline (the base stack has no results), 0 pass.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf import project, results
from kperf.config import ConfigError
from kperf.gate import asvio, report
from kperf.gate.config import Thresholds
from kperf.gate.errors import EXIT_BROKEN, EXIT_GATE_ERROR, EXIT_INCONCLUSIVE, STATUS, GateError
from kperf.gate.model import Block, CaseData, Verdict
from kperf.gate.sequential import exit_code, finalise, replay
from kperf.paths import inside
from kperf.results import ResultsFileError

REPORT_TITLE = "### Stack comparison"


@dataclass(frozen=True)
class StackFile:
    path: Path
    machine: str
    env: str
    params: dict[str, str]

    def fields(self) -> dict[str, str]:
        return {**self.params, "machine": self.machine, "env": self.env}


def parse_selector(text: str, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise GateError(f"{flag} {text!r}: expected KEY=VALUE[,KEY=VALUE...]",
                            EXIT_INCONCLUSIVE)
        out[key.strip()] = value.strip()
    if not out:
        raise GateError(f"{flag}: empty stack selector", EXIT_INCONCLUSIVE)
    return out


def stack_files(results_dir: Path, commit: str, hash_length: int) -> list[StackFile]:
    """Every results file of ``commit`` under ``results_dir``, any machine or env."""
    out = []
    for path in sorted(results_dir.glob(f"*/{commit[:hash_length]}-*.json")):
        found = results.load(path)
        params = {str(k): str(v) for k, v in found.params.items()}
        # an environment's env_nobuild variables (a gfx942 toolchain): asv's "env-NAME"
        params |= {f"env-{k}": str(v) for k, v in found.env_vars.items()}
        out.append(StackFile(path, path.parent.name, found.env_name, params))
    return out


def select(files: Sequence[StackFile], selector: dict[str, str], which: str,
           results_dir: Path, commit: str) -> StackFile:
    matching = [f for f in files if all(f.fields().get(k) == v for k, v in selector.items())]
    wanted = ",".join(f"{k}={v}" for k, v in selector.items())
    if len(matching) == 1:
        return matching[0]
    if not matching:
        code = EXIT_INCONCLUSIVE if which == "base" else EXIT_BROKEN
        label = "no baseline" if which == "base" else "no results for the head stack"
        seen = sorted({f"{f.machine}/{f.env}" for f in files}) or ["none"]
        raise GateError(f"{label}: no results file of commit {commit[:12]} in {results_dir} "
                        f"matches {wanted} ({which}); files there: {seen}", code)
    names = [f"{f.machine}/{f.path.name}" for f in matching]
    raise GateError(f"--{which} {wanted} matches {len(matching)} results files in "
                    f"{results_dir}: {names}; add a key (env=..., machine=...) to pick one",
                    EXIT_INCONCLUSIVE)


def read_stack(chosen: StackFile, records_root: Path | None, commit: str,
               meta: dict[str, dict[str, Any]]) -> dict[str, Block]:
    _, per_case = asvio.read_results_file(chosen.path)
    if records_root is not None:
        machine_dir = inside(records_root, chosen.machine, what="machine folder",
                             source=chosen.path)
        records = asvio.read_records(machine_dir, commit, meta)
        for name, block in per_case.items():
            recs = records.get((chosen.env, name))
            if recs and block.status == "ok":
                asvio.attach_records(block, recs)
    return per_case


def collect(rounds: Sequence[tuple[Path, Path | None]], commit: str, base: dict[str, str],
            head: dict[str, str], hash_length: int = 8
            ) -> tuple[list[CaseData], dict[str, StackFile]]:
    """Cases of both stacks over every round (results dir, records dir or None): each
    results directory is one round, both stacks measured in it (kperf.stacks.matrix)."""
    cases: dict[str, CaseData] = {}
    chosen: dict[str, StackFile] = {}
    for index, (results_dir, records_root) in enumerate(rounds, start=1):
        meta = asvio.read_benchmark_meta(results_dir)
        files = stack_files(results_dir, commit, hash_length)
        for which, selector in (("base", base), ("head", head)):
            picked = select(files, selector, which, results_dir, commit)
            chosen.setdefault(which, picked)
            for name, block in read_stack(picked, records_root, commit, meta).items():
                block.side, block.round = which, index
                block.generation = index  # each results folder: processes of its own
                unit = str(meta.get(name.split("(")[0], {}).get("unit", "seconds"))
                cases.setdefault(name, CaseData(name, "", unit)).blocks.append(block)
    if chosen["base"].path == chosen["head"].path:
        raise GateError(f"--base and --head select the same results file "
                        f"{chosen['base'].path}", EXIT_INCONCLUSIVE)
    return list(cases.values()), chosen


def stack_label(f: StackFile) -> str:
    keys = ("rocm", "cuda", "torch", "triton", "tilelang", "apache-tvm-ffi", "python",
            "env-KPERF_ROCM_TOOLCHAIN")
    parts = [f"{k} {f.params[k]}" for k in keys if f.params.get(k) not in (None, "", "matrix")]
    return (f"{report.md(f.machine)} / {report.md(f.env)}"
            + (f" ({report.md(', '.join(parts))})" if parts else ""))


def markdown(verdicts: Sequence[Verdict], code: int, info: dict[str, Any],
             max_rows: int = 60) -> str:
    title = f"{REPORT_TITLE}{' — ' + info['label'] if info.get('label') else ''}"
    lines = [report.COMMENT_MARKER.replace("gate", "stackcmp"), title, "",
             report.summary_line(verdicts, code), "",
             f"commit `{info['commit'][:10]}`: base stack {info['base_stack']} → head stack "
             f"{info['head_stack']}; {info['rounds']} round(s) read as stored (each a results "
             f"folder holding both stacks), no re-measure; false alarms controlled across "
             f"the cases and looks ({info['correction']}, alpha {info['alpha']}).", ""]
    lines += report.table_lines(verdicts, False, max_rows, json_name="stackcmp.json")
    return "\n".join(lines) + "\n"


def resolve_commit(repo: Path, revision: str) -> str:
    out = subprocess.run(["git", "rev-parse", f"{revision}^{{commit}}"], cwd=repo,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise GateError(f"cannot resolve commit {revision!r} in {repo}: {out.stderr.strip()}",
                        EXIT_INCONCLUSIVE)
    return out.stdout.strip()


def compare(args: argparse.Namespace) -> tuple[list[Verdict], dict[str, Any]]:
    repo = args.repo.resolve()
    th = Thresholds.load(args.thresholds or project.of(repo).thresholds)
    base = parse_selector(args.base, "--base")
    head = parse_selector(args.head, "--head")
    commit = resolve_commit(repo, args.commit)
    results = [Path(p).resolve() for p in (args.results or [repo / ".asv" / "results"])]
    for path in results:
        if not path.is_dir():
            raise GateError(f"no baseline: results directory {path} does not exist",
                            EXIT_INCONCLUSIVE)
    records = [None if args.no_records else path.parent / "records" for path in results]
    cases, chosen = collect(list(zip(results, records, strict=True)), commit, base, head,
                            args.hash_length)
    verdicts = [_unconfirmed(v) for v in finalise(replay(cases, th),
                                                    f"undecided after {len(results)} round(s)")]
    info = {"label": args.label, "commit": commit, "base": commit, "head": commit,
            "base_how": "stack " + args.base, "machine": chosen["head"].machine,
            "base_stack": stack_label(chosen["base"]), "head_stack": stack_label(chosen["head"]),
            "base_selector": base, "head_selector": head,
            "base_file": str(chosen["base"].path), "head_file": str(chosen["head"].path),
            "base_params": chosen["base"].params, "head_params": chosen["head"].params,
            "rounds": len(results), "remeasured": False,
            "correction": {"bh": "Benjamini-Hochberg", "holm": "Holm"}[th.correction],
            "alpha": th.alpha, "thresholds": str(th.path), "multi_env": False}
    return verdicts, info


def _unconfirmed(v: Verdict) -> Verdict:
    """Stored runs are never re-measured: a flagged case stands on its looks alone."""
    if v.candidate and v.confirmed is None:
        v.verdict = v.candidate
        v.reason = "not re-measured: stack comparisons read stored rounds only"
    return v


def write_failure(out_dir: Path, message: str, code: int, label: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"{REPORT_TITLE}{' — ' + report.md(label) if label else ''}"
    status = STATUS[code]
    (out_dir / "stackcmp.md").write_text(
        f"{title}\n\n**{status}** (exit {code}): {report.md(message)}\n")
    (out_dir / "stackcmp.json").write_text(json.dumps(
        {"schema": report.REPORT_SCHEMA, "exit_code": code, "status": status, "error": message,
         "label": label, "cases": []}, indent=1))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("A stack is"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="stack X: KEY=VALUE[,KEY=VALUE...]")
    parser.add_argument("--head", required=True, help="stack Y: KEY=VALUE[,KEY=VALUE...]")
    parser.add_argument("--commit", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (cwd)")
    parser.add_argument("--results", action="append",
                        help="asv results directory, repeatable: one per round "
                             "(default <repo>/.asv/results)")
    parser.add_argument("--no-records", action="store_true",
                        help="ignore the per-sample records (clocks) next to the results")
    parser.add_argument("--thresholds", type=Path, help="default <repo>/thresholds.json")
    parser.add_argument("--hash-length", type=int, default=8, help="asv hash_length (8)")
    parser.add_argument("--out", type=Path, help="report folder (default: cwd)")
    parser.add_argument("--label", default="", help="shown in the report title")
    parser.add_argument("--max-rows", type=int, default=60)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out_dir = (args.out or Path.cwd()).resolve()
    try:
        verdicts, info = compare(args)
    except (GateError, ResultsFileError, ConfigError) as err:
        code = err.exit_code if isinstance(err, GateError) else EXIT_GATE_ERROR
        print(f"stackcmp: {err}", file=sys.stderr)
        write_failure(out_dir, str(err), code, args.label)
        return code
    code = exit_code(verdicts)
    text = markdown(verdicts, code, info, args.max_rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "stackcmp.md").write_text(text)
    (out_dir / "stackcmp.json").write_text(json.dumps(report.report_json(verdicts, code, info),
                                                      indent=1))
    print(text)
    print(f"stackcmp: exit {code}; report {out_dir / 'stackcmp.md'}, {out_dir / 'stackcmp.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
