"""Find the commit that introduced a regression seen in the history, with ``asv find``.

    kperf bisect A B \\
        "bench_gemm.GemmTime.track_time('square-8192', 'fp16', 'triton')"
    kperf bisect v1.2 HEAD bench_gemm.GemmRegisters.track_value --invert

The case is one benchmark, or one parameter combination written the way asv and the gate
name it (``benchmark(param, ...)``). ``asv find`` bisects GOOD..BAD for the largest step;
its measurements go to ``.asv/bisect-results`` (not the published history). The tool
prints the commit found, its parent, and the value at both.

Exit codes: 0 a commit was found, 1 asv find failed or found nothing, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from kperf.gate import asvio
from kperf.gate.errors import GateError
from kperf.paths import PathError, check_scratch, kept_paths, safe_name

FOUND = re.compile(r"Greatest (regression|improvement) found: ([0-9a-f]{6,40})")


def case_regex(case: str) -> str:
    """asv matches -b / find's name against ``name(params)``: anchor the exact case."""
    return "^" + re.escape(case) + "$"


def run_find(repo: Path, conf_path: Path, machine: str, good: str, bad: str, case: str,
             invert: bool) -> tuple[int, str]:
    from kperf.history.asvrun import asv_env

    cmd = [sys.executable, "-m", "asv", "--config", str(conf_path), "find", f"{good}..{bad}",
           case_regex(case), "--machine", machine, "--show-stderr"]
    if invert:
        cmd.append("--invert")
    print("+ asv " + " ".join(cmd[3:]), flush=True)
    proc = subprocess.run(cmd, cwd=repo, env=asv_env(machine, repo), capture_output=True,
                          text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode, proc.stdout + proc.stderr


def value_at(results_dir: Path, machine: str, commit: str, case: str) -> float | None:
    for path in sorted((results_dir / machine).glob(f"{commit[:8]}-*.json")):
        _, per_case = asvio.read_results_file(path)
        data = per_case.get(case)
        if data is not None and data.status == "ok":
            return data.value
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__[__doc__.index("Exit codes"):])
    parser.add_argument("good", help="a revision without the regression")
    parser.add_argument("bad", help="a revision with it")
    parser.add_argument("case", help="benchmark or benchmark(param, ...)")
    parser.add_argument("--invert", action="store_true", help="look for an improvement")
    parser.add_argument("--repo", type=Path, default=Path.cwd())
    parser.add_argument("--config", type=Path, help="default <repo>/asv.conf.json")
    parser.add_argument("--machine", help="asv machine name (default: described from this host)")
    parser.add_argument("--results-dir", type=Path, help="default <repo>/.asv/bisect-results")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    try:
        conf = asvio.load_project_conf(args.config or repo / "asv.conf.json")
        good = asvio.git(repo, "rev-parse", f"{args.good}^{{commit}}")
        bad = asvio.git(repo, "rev-parse", f"{args.bad}^{{commit}}")
        scratch = (args.results_dir or repo / ".asv" / "bisect-results").resolve()
        check_scratch(scratch, kept_paths(repo, conf), "--results-dir", not_above=[repo])
        machine = safe_name(asvio.ensure_machine(args.machine), "--machine")
    except (GateError, PathError) as err:
        print(f"bisect: {err}", file=sys.stderr)
        return 2
    derived = asvio.derived_config(conf, repo, scratch)
    derived["results_dir"] = str(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    conf_path = scratch / "asv.conf.json"
    conf_path.write_text(json.dumps(derived, indent=2))
    rc, log = run_find(repo, conf_path, machine, good, bad, args.case, args.invert)
    match = FOUND.search(log)
    if rc != 0 or not match:
        print(f"bisect: asv find exited {rc} without naming a commit", file=sys.stderr)
        return 1
    found = asvio.git(repo, "rev-parse", match.group(2))
    parent = asvio.git(repo, "rev-parse", f"{found}^")
    after = value_at(scratch, machine, found, args.case)
    before = value_at(scratch, machine, parent, args.case)
    subject = asvio.git(repo, "log", "-1", "--format=%h %s", found)
    ratio = f"x{after / before:.3f}" if after is not None and before else "n/a"
    print(f"bisect: greatest {match.group(1)} at {subject}")
    print(f"bisect: {args.case}: {before} at parent {parent[:10]} -> {after} ({ratio})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
