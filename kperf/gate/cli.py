"""``kperf gate``: measure, decide, report; the exit code says what to do.

    kperf gate                      # merge-base(HEAD, main) against HEAD
    kperf gate --base v1.2 --head my-branch -b GemmTime
    kperf gate --resume             # go on with a run that was cut off
    kperf gate --no-run             # decide the stored run again

Exit codes (the first that applies):
  4  the gate itself failed: bad configuration or command line, unreadable input,
     nothing judged, a crash of the gate, a full disk
  2  a benchmark broke: a case failed, crashed, hung or was wrong at head
  1  regression: at least one case is SLOW
  3  inconclusive or no baseline: a case is undecided within the budget, or has no base
  0  pass: every case is SAME or FAST
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from kperf import project
from kperf.config import ConfigError
from kperf.gate import asvio, codegen, report
from kperf.gate.blocks import BlockLog, case_data, case_wall_s
from kperf.gate.config import Thresholds
from kperf.gate.errors import EXIT_GATE_ERROR, GateError
from kperf.gate.measure import Run
from kperf.gate.model import Verdict
from kperf.gate.plan import (
    STATE_SCHEMA,
    GatePlan,
    Lane,
    case_op,
    kernel_key,
    scratch_dir,
    sites_for,
    unchanged_kernels,
    write_state,
)
from kperf.gate.sequential import exit_code, finalise, replay
from kperf.ops.registry import working_tree_declarations
from kperf.paths import PathError
from kperf.specs import GateCase

KPERF_DIR = Path(__file__).resolve().parent.parent  # the gate's own code: where a crash is named
CODEGEN_KINDS = ("static", "compile")


class GateParser(argparse.ArgumentParser):
    """argparse, but a bad command line exits 4 (the gate itself failed), never argparse's
    2, which the workflow would read as "a benchmark broke"."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_GATE_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = GateParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Exit codes"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (cwd)")
    parser.add_argument("--config", type=Path, help="asv config (default <repo>/asv.conf.json)")
    parser.add_argument("--machine", help="machine name in the report (default: this host's)")
    add_gate_options(parser)
    return parser


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """What to compare and how."""
    parser.add_argument("--thresholds", type=Path, help="default <repo>/thresholds.json")
    parser.add_argument("--head", default="HEAD", help="head revision (default HEAD)")
    parser.add_argument("--base", help="base revision (default: merge-base of head and main)")
    parser.add_argument("--main-branch", help="default: the first of asv.conf.json 'branches'")
    parser.add_argument("-b", "--bench", action="append",
                        help="case regex, as asv's -b (repeatable; default: the PR subset)")
    parser.add_argument("--pr-dir", type=Path, help="default <repo>/.asv/pr-results")
    parser.add_argument("--out", type=Path, help="report folder (default: the PR directory)")
    parser.add_argument("--label", default="", help="runner label shown in the report title")
    parser.add_argument("--every-case", action="store_true",
                        help="measure the cases of kernels whose code is the same at base and "
                             "head too (by default SAME unmeasured: docs/gate.md)")
    parser.add_argument("--rocm-toolchain", nargs="+", metavar="NAME",
                        help="gfx942 toolchains that compile TileLang's HIP source, each its "
                             "own verdict: clang19, llvm19, rocm-<version> (default: the "
                             "run's, $KPERF_ROCM_TOOLCHAIN or clang19; docs/amd.md)")
    parser.add_argument("--no-run", action="store_true", help="decide the stored run again")
    parser.add_argument("--resume", action="store_true", help="continue a stored run")
    parser.add_argument("--max-rows", type=int, default=60)


def select(cases: list[GateCase], regexes: list[str], gpu: bool) -> list[GateCase]:
    """The cases the regexes match; without a GPU only what needs none (static figures and
    cold compiles)."""
    patterns = [re.compile(r) for r in regexes]
    chosen = [c for c in cases if any(p.search(c["name"]) for p in patterns)]
    return chosen if gpu else [c for c in chosen if c["kind"] in CODEGEN_KINDS]


def per_toolchain(cases: list[GateCase], toolchains: list[str]) -> list[GateCase]:
    """AMD TileLang code cases once per toolchain (gfx950: clang22 for clang19 and llvm19),
    each named ``<case> [<toolchain>]``, its suite's case in ``suite_case`` (Triton brings
    its own LLVM: its cases are judged once)."""
    from kperf.core.hip import chain_for
    out = []
    for case in cases:
        if (case["kind"] in CODEGEN_KINDS and case.get("target", "").startswith("gfx")
                and case["spec"].get("backend") == "tilelang"):
            chains = dict.fromkeys(chain_for(c, case["target"]) for c in toolchains)
            out += [{**case, "name": f"{case['name']} [{chain}]", "toolchain": chain,
                     "suite_case": case["name"]} for chain in chains]
        else:
            out.append(case)
    return out


def buildable(cases: list[GateCase]) -> tuple[list[GateCase], dict[str, str]]:
    """(the cases this machine can build, {target/backend[/toolchain]: why not} for the
    rest): a GPU runner without the gfx942 tools leaves gfx942 to a machine that has them,
    and says so, rather than judging nothing as SAME."""
    from kperf.core.static import unavailable

    kept, why = [], {}
    for case in cases:
        if case["kind"] not in CODEGEN_KINDS:
            kept.append(case)
            continue
        backend, chain = case["spec"].get("backend", ""), case.get("toolchain")
        what = "/".join(x for x in (case["target"], backend, chain) if x)
        if what not in why:
            why[what] = unavailable(case["target"], backend, chain)
        if not why[what]:
            kept.append(case)
    return kept, {k: v for k, v in why.items() if v}


def suite_cases(repo: Path) -> list[GateCase]:
    """The repository's own suite (its working tree's benchmarks/), as the gate can
    measure it."""
    from kperf.suites.timed import gate_cases

    return gate_cases(repo)


def gpu_present() -> bool:
    from kperf.machine import has_gpu

    return os.environ.get("KPERF_DEVICE") == "cpu" or has_gpu()


def plan_run(args: argparse.Namespace, repo: Path, pr_dir: Path, th: Thresholds) -> GatePlan:
    conf = asvio.load_project_conf(args.config or repo / "asv.conf.json")
    commits = project.of(repo).git_repo  # this repository, or the library it tracks
    head = asvio.git(commits, "rev-parse", f"{args.head}^{{commit}}")
    main_branch = args.main_branch or (conf.get("branches") or ["main"])[0]
    base, how = asvio.resolve_base(commits, head, args.base, main_branch)
    gpu = gpu_present()
    every = suite_cases(repo)
    regexes = args.bench or (th.pr_regexes() if gpu else list(th.codegen_subset))
    chosen = select(every, regexes, gpu)
    if not chosen:
        raise GateError("no case matches " + ", ".join(regexes)
                        + ("" if gpu else " among the static figures and compiles (no GPU here)"))
    cases, not_here = buildable(per_toolchain(chosen, toolchains_of(args)))
    if not cases:
        raise GateError("no case this machine can build matches " + ", ".join(regexes) + ": "
                        + "; ".join(f"{k}: {v}" for k, v in not_here.items()))
    from kperf import machine as machine_tool

    machine = getattr(args, "machine", None) or machine_tool.describe(None)["machine"]
    return GatePlan(repo, pr_dir, base, head, how, machine, cases,
                    [Lane(cases=[c["name"] for c in cases])], args.label,
                    ops=sorted({case_op(c) for c in every} - {""}),
                    every_case=getattr(args, "every_case", False), not_here=not_here)


def toolchains_of(args: argparse.Namespace) -> list[str]:
    """The gfx942 toolchains a run judges (``--rocm-toolchain``, else the run's own), each
    one that exists by name; an unknown one is the gate's failure, naming the choices."""
    from kperf.core import hip

    names = list(getattr(args, "rocm_toolchain", None) or [hip.toolchain_name()])
    if len(set(names)) != len(names):
        raise GateError(f"--rocm-toolchain: a toolchain is listed twice: {names}")
    for name in names:
        if name not in ("clang19", "llvm19", "clang22") and not name.startswith("rocm-"):
            raise GateError(f"--rocm-toolchain {name!r}: not clang19, llvm19, clang22 or rocm-<v>")
    return names


def measure(plan: GatePlan, th: Thresholds, resume: bool) -> dict[str, Any]:
    scratch_dir(plan, fresh=not resume)
    state = plan.state()
    write_state(plan.pr_dir, {**state, "status": "building"})
    started = time.time()
    sites = sites_for(plan)
    unchanged = {} if plan.every_case else unchanged_kernels(plan, sites)
    state["unchanged"] = unchanged
    write_state(plan.pr_dir, {**state, "status": "measuring"})  # --no-run after a cut
    measured = plan.without_kernels(unchanged)
    stopped = "nothing to measure: every case's code is the same at base and head"
    if measured.cases:
        run = Run(measured, th, sites)
        try:
            stopped = run.run()
        finally:
            run.retire_workers()
    state.update(status="done", stopped=stopped, wall_s=time.time() - started)
    write_state(plan.pr_dir, state)
    return state


def decide(pr_dir: Path, state: dict[str, Any], th: Thresholds,
           out_dir: Path | None = None) -> list[Verdict]:
    """Verdicts of a stored run: this version's blocks, or an older gate's asv rounds.
    With ``out_dir``, its rounds.md too (report.rounds_markdown)."""
    unmeasured: list[Verdict] = []
    if state.get("schema") == STATE_SCHEMA:
        unchanged = state.get("unchanged") or {}
        planned = [c for c in state["cases"] if unchanged_digest(c, unchanged) is None]
        rows = measured_rows(pr_dir, planned)
        unmeasured = [unchanged_verdict(c, unchanged_digest(c, unchanged), th)
                      for c in state["cases"] if unchanged_digest(c, unchanged) is not None]
        cases = case_data(planned, rows)
        walls = {c["name"]: case_wall_s(rows, c["name"]) for c in planned}
    else:
        rounds = sorted(p for p in pr_dir.glob("round-*") if p.is_dir())
        if not rounds:
            raise GateError(f"nothing to decide: {pr_dir}/gate-state.json is an older gate's, "
                            f"and no round-* folder of its measurements is there")
        extra = [pr_dir / "confirm"] if (pr_dir / "confirm").is_dir() else []
        cases = asvio.load_asv_rounds(rounds + extra, state["machine"], state["base"],
                                      state["head"], int(state.get("hash_length", 8)))
        walls = {}
    verdicts = replay(cases, th) + unmeasured
    if out_dir is not None:
        placed = frozenset(n for n, k in th.classes.items() if k.level_by_placement)
        report.write_text(out_dir / "rounds.md", report.rounds_markdown(
            cases, verdicts, th.sequential.host_behind_share, placed))
    stopped = state.get("stopped", "the run ended")
    for v in verdicts:
        if not v.decided and walls.get(v.case, 0) >= th.case_wall_s:
            v.reason = f"the case's budget of {th.case_wall_s:.0f} s spent; {v.reason}"
    return finalise(verdicts, f"undecided when the rounds stopped ({stopped})")


def measured_rows(pr_dir: Path, planned: list[GateCase]) -> list[dict[str, Any]]:
    """The blocks of a run that planned to measure ``planned``; a run that measured none
    of them judged nothing, which is the gate's failure, never "inconclusive"."""
    path = pr_dir / "blocks.jsonl"
    if planned and not path.exists():
        raise GateError(f"nothing to decide: {path} does not exist (no block of the "
                        f"{len(planned)} planned case(s) was measured)")
    return BlockLog(path).read()


def unchanged_digest(case: GateCase, unchanged: dict[str, str]) -> str | None:
    """The digest of a case's unchanged code (its kernel's; an older gate's state keyed
    it by op), else None: the case is measured."""
    return unchanged.get(kernel_key(case), unchanged.get(case_op(case)))


def unchanged_verdict(case: GateCase, digest: str, th: Thresholds) -> Verdict:
    """SAME without a block: the case's kernel runs the same code at base and head."""
    rule, klass = th.rule_for(case["name"])
    return Verdict(case["name"], case.get("env", ""), klass.name, verdict="SAME",
                   decided=True, unit=case.get("unit", "seconds"),
                   higher_is_better=rule.higher_is_better, unchanged=True,
                   reason=f"not measured: {kernel_key(case)}'s code is the same at base and "
                          f"head (digest {digest})")


def read_state(pr_dir: Path) -> dict[str, Any]:
    """gate-state.json, checked against kperf/schemas/gate-state.json (errors name the
    file and the field). Without it there is nothing to decide or resume: the gate's
    failure (4), never "inconclusive" (3), which CI would pass."""
    from kperf.config import load_json

    path = pr_dir / "gate-state.json"
    if not path.exists():
        raise GateError(f"nothing to decide: {path} does not exist (run the gate without "
                        f"--no-run or --resume first)")
    return load_json(path, "gate-state")


def held_classes(verdicts: list[Verdict], th: Thresholds) -> str:
    """The design line's word on classes timed behind a hold before every rep: their times
    read below the history's, which holds no rep where the host keeps ahead (docs/gate.md,
    "Buffers moved every block")."""
    holds = sorted({(v.klass, th.classes[v.klass].rep_hold_min_s) for v in verdicts
                    if v.klass in th.classes and th.classes[v.klass].rep_hold_min_s})
    return "".join(f"; {name} cases timed behind a {hold_s * 1e6:.0f} µs hold before each rep, "
                   f"so their times can read below the history's (docs/gate.md)"
                   for name, hold_s in holds)


def info_of(state: dict[str, Any], verdicts: list[Verdict], th: Thresholds) -> dict[str, Any]:
    rounds = max((v.rounds for v in verdicts), default=0)
    seq = th.sequential
    kinds = {c.get("kind") for c in state.get("cases") or []}
    design = (f"base and head alternating in rounds of one block each (at most "
              f"{rounds} rounds used; looks after {seq.min_rounds}-{seq.max_rounds}; "
              f"SLOW/FAST re-measured by fresh workers){held_classes(verdicts, th)}")
    if kinds and "time" not in kinds:
        design = ("base and head built side by side" + (", each with its stack's compilers"
                                                         if state.get("stacks") else "")
                  + "; their device code's static figures "
                  "compared exactly" + (f"; cold compiles to a device binary, by their "
                                        f"CPU seconds: {design}"
                                        if "compile" in kinds else ""))
    return {"label": state.get("label", ""), "base": state["base"], "head": state["head"],
            "base_how": state.get("base_how", ""), "machine": state["machine"],
            "design": design,
            "stopped": state.get("stopped", ""), "wall_s": state.get("wall_s"),
            "correction": {"bh": "Benjamini-Hochberg", "holm": "Holm"}[th.correction],
            "alpha": th.alpha, "beta": th.beta, "thresholds": str(th.path),
            "multi_env": len({v.env for v in verdicts}) > 1,
            **({"stacks": state["stacks"]} if state.get("stacks") else {})}


def _interrupt_on_sigterm() -> None:
    """``timeout`` and CI cancel with SIGTERM: end like Ctrl-C, report written, workers
    retired, everything measured kept for --resume."""
    import signal

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, raise_interrupt)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv), plan_run)


def run(args: argparse.Namespace,
        make_plan: Callable[[argparse.Namespace, Path, Path, Thresholds], GatePlan]) -> int:
    """Guard the folders, plan (or resume, or only re-read), measure, decide, report; every
    way out writes gate.md and gate.json, and a crash anywhere exits 4, naming where."""
    _interrupt_on_sigterm()
    repo = args.repo.resolve()
    pr_dir = (args.pr_dir or repo / ".asv" / "pr-results").resolve()
    out_dir = (args.out or pr_dir).resolve()
    try:  # nothing is written anywhere (not even the failure report) past a bad folder
        conf = asvio.load_project_conf(args.config or repo / "asv.conf.json")
        asvio.guard_gate_dirs(repo, conf, pr_dir, out_dir)
    except Exception as err:  # every failure here is the gate's own (4)
        print(f"gate: {failure_message(err, pr_dir)}", file=sys.stderr)
        return EXIT_GATE_ERROR
    from kperf.core.worker import run_workers

    try:  # the run's workers in a folder of its own: stopped, logs kept, folder removed
        with run_workers("kperf-gate-", logs=out_dir / "worker-logs"):
            return judge(args, make_plan, repo, pr_dir, out_dir)
    except KeyboardInterrupt:
        return fail(out_dir, "interrupted; --resume goes on from what was measured",
                    EXIT_GATE_ERROR, args.label)
    except Exception as err:  # never a regression, never a pass
        code = err.exit_code if isinstance(err, GateError) else EXIT_GATE_ERROR
        return fail(out_dir, failure_message(err, pr_dir), code, args.label)


def judge(args: argparse.Namespace,
          make_plan: Callable[[argparse.Namespace, Path, Path, Thresholds], GatePlan],
          repo: Path, pr_dir: Path, out_dir: Path) -> int:
    """The gate's work between its folders' guard and its exit: its exit code."""
    th = replace(Thresholds.load(args.thresholds or project.load(repo).thresholds),
                 declared=working_tree_declarations(repo))  # ops' classes, PR subset
    if args.no_run or args.resume:
        state = read_state(pr_dir)
    if not args.no_run:
        plan = (make_plan(args, repo, pr_dir, th) if not args.resume
                else plan_of(state, repo, pr_dir))
        state = measure(plan, th, args.resume)
    verdicts = decide(pr_dir, state, th, out_dir)
    if not verdicts:
        raise GateError(f"nothing was judged: every case of {pr_dir / 'gate-state.json'} "
                        f"was skipped at base and at head")
    code = exit_code(verdicts)
    rows = BlockLog(pr_dir / "blocks.jsonl").read()
    found = codegen.kernels(state.get("cases") or [], rows, verdicts)
    notes = ((state.get("stacks") or {}).get("head") or {}).get("components") or {}
    for kernel in found:
        kernel.note = notes.get(kernel.key, "")
    write_report(out_dir, verdicts, code, info_of(state, verdicts, th), args.max_rows, found,
                 state.get("not_here") or {})
    return code


def failure_message(err: BaseException, pr_dir: Path) -> str:
    """What a failure says: the message of an error that names its file (configuration,
    paths, the gate's own), else the exception with the file and line of the gate's code
    it came from and the run it was judging, never a bare TypeError."""
    if isinstance(err, GateError | ConfigError | PathError):
        return str(err)
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    traceback.print_exception(err)
    frames = traceback.extract_tb(err.__traceback__)
    where = next((f"kperf/{Path(f.filename).resolve().relative_to(KPERF_DIR)}:{f.lineno}"
                  for f in reversed(frames)
                  if Path(f.filename).resolve().is_relative_to(KPERF_DIR)), "?")
    return (f"the gate itself failed ({type(err).__name__}: {err}) at {where}, judging "
            f"the run in {pr_dir} (gate-state.json, blocks.jsonl)")


def write_report(out_dir: Path, verdicts: list[Verdict], code: int, info: dict[str, Any],
                 max_rows: int, found: Sequence[codegen.Kernel] = (),
                 not_here: dict[str, str] | None = None) -> None:
    """gate.md and gate.json; with ``found`` (the kernels of the codegen cases), the
    generated code's section."""
    text = report.markdown(verdicts, code, info, max_rows,
                           sections=codegen.section(found, not_here or {}, report.md))
    data = report.report_json(verdicts, code, info)
    if found or not_here:
        data["codegen"], data["not_here"] = codegen.summary_json(found), not_here or {}
    report.write(out_dir, text, data)
    print(text)
    print(f"gate: exit {code}; report {out_dir / 'gate.md'}, {out_dir / 'gate.json'}")


def plan_of(state: dict[str, Any], repo: Path, pr_dir: Path) -> GatePlan:
    if state.get("schema") != STATE_SCHEMA:
        raise GateError(f"{pr_dir}: a run of an older gate cannot be resumed; use --no-run")
    return GatePlan(repo, pr_dir, state["base"], state["head"], state["base_how"],
                    state["machine"], state["cases"],
                    [Lane(**lane) for lane in state["lanes"]], state.get("label", ""),
                    ops=list(state.get("ops", [])), every_case=bool(state.get("every_case")),
                    not_here=dict(state.get("not_here") or {}),
                    stacks=dict(state.get("stacks") or {}))


def fail(out_dir: Path, message: str, code: int, label: str) -> int:
    print(f"gate: {message}", file=sys.stderr)
    try:
        report.write_failure(out_dir, message, code, label)
    except GateError as err:
        print(f"gate: {err}", file=sys.stderr)
    return code
