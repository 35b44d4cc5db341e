"""Run the suite over the GPUs of one host: each GPU its own asv machine, each case on one GPU.

    python -m kperf.history.shard gpus                    # the GPUs found and their machine names
    python -m kperf.history.shard plan [-b REGEX]         # which GPU runs which case
    python -m kperf.history.shard run [--range A..B] [-b REGEX] [--only GPU]
    python -m kperf.history.shard gate [--base B] [--head H] [-b REGEX]   # the PR gate, per GPU
    ... --reassign "why"                          # accept a changed GPU set, recording it

Two GPUs of the same model differ by a few percent (3% on two H200s for one small kernel),
so a case's history must stay on one GPU. Every case is assigned to a GPU by rendezvous
hashing (the GPU whose hash of (UUID, case) is largest): stable across runs, unaffected
by new cases, and a GPU added to the host takes only the cases it wins (about 1/N). The
assignment and every change to it are kept in ``<results_dir>/shards/<host>.shardmap``
(JSON); a GPU set that differs from the recorded one is refused until ``--reassign`` says
why, and the reassignment (which case moved from which GPU to which) is recorded.

``run`` starts one asv process per GPU at once, each with only its GPU visible
(CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES), its own machine ``<host>-<gpu>-<uuid8>``,
its own environment directory (a build in one shard never races another), and its own
``benchmarks.json``; results go through a link into ``<results_dir>/<machine>/``, and
``asv publish`` runs once over all of them. ``gate`` measures each GPU's cases there, base
and head interleaved, all GPUs at once, and decides all cases together (one false-alarm
correction); the report names the GPU that judged each case.

``KPERF_FAKE_GPUS="uuid[=model],..."`` stands in for the GPUs (tests, dry runs on a CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kperf import machine as machine_tool
from kperf.gate import asvio
from kperf.gate.cli import add_gate_options
from kperf.gate.config import Thresholds
from kperf.gate.errors import GateError
from kperf.history.gpus import Gpu, ShardError, describe_machines, enumerate_gpus
from kperf.history.shardmap import (
    ShardMap,
    check_gpu_set,
    load_map,
    save_map,
    shard_file,
    update_map,
)
from kperf.history.shardrun import (
    Shard,
    benchmark_cases,
    build_shards,
    config_for,
    discover,
    is_gpu,
    link_results,
    log_tail,
    run_parallel,
    select,
)
from kperf.paths import PathError

# --------------------------------------------------------------------------- GPUs


# --------------------------------------------------------------------------- assignment


# --------------------------------------------------------------------------- cases


# --------------------------------------------------------------------------- machines


# --------------------------------------------------------------------------- running asv


@dataclass
class Context:
    repo: Path
    conf: dict[str, Any]
    conf_path: Path
    results_dir: Path
    host: str
    gpus: list[Gpu]
    map_path: Path
    recorded: ShardMap | None
    cpu_only: bool


def context(args: argparse.Namespace) -> Context:
    repo = args.repo.resolve()
    conf_path = (args.config or repo / "asv.conf.json").resolve()
    conf = asvio.load_project_conf(conf_path)
    results_dir = (repo / conf.get("results_dir", "results")).resolve()
    host = args.host or machine_tool.host_name()
    gpus = enumerate_gpus()
    map_path = (args.shard_file or shard_file(results_dir, host)).resolve()
    recorded = load_map(map_path)
    check_gpu_set(recorded, gpus, args.reassign, map_path)  # before anything slow
    # The GPU set above already honours it; left in place it would filter the shards'
    # processes again and shift their HIP_VISIBLE_DEVICES index.
    os.environ.pop("ROCR_VISIBLE_DEVICES", None)
    if all(g.vendor == "fake" for g in gpus):
        cpu_only = True
    else:
        from kperf.machine import has_gpu

        cpu_only = not has_gpu()
    return Context(repo, conf, conf_path, results_dir, host, gpus, map_path, recorded,
                   cpu_only)


def prepare(ctx: Context, args: argparse.Namespace, discover_into: Path, save: bool,
            ) -> tuple[ShardMap, dict[str, list[str]], list[Shard]]:
    """Machines written, suite discovered, assignment updated, shards for the selection."""
    infos = describe_machines(ctx.gpus, ctx.host)
    for info in infos.values():
        machine_tool.write_machine_file(info)
    first = infos[ctx.gpus[0].uuid]["machine"]
    per_bench = benchmark_cases(discover(ctx.repo, ctx.conf, discover_into, first))
    every = [c for cases in per_bench.values() for c in cases]
    machines = {uuid: info["machine"] for uuid, info in infos.items()}
    shard_map, notes = update_map(ctx.recorded, ctx.gpus, machines, every, ctx.host,
                                  args.reassign, ctx.map_path)
    if save:
        save_map(ctx.map_path, shard_map)
    for note in notes:
        print(f"shards: {note}")
    benches = args.bench or default_benches(ctx)
    selected = select(every, benches)
    if not selected:
        raise ShardError(f"no benchmark case matches {benches}")
    shards = build_shards(shard_map, ctx.gpus, selected, per_bench, ctx.repo, args.only or ())
    print_plan(shard_map, ctx.gpus, selected, shards)
    if not shards:
        raise ShardError(f"none of the {len(selected)} selected case(s) is assigned to the "
                         f"GPU(s) chosen with --only {args.only}")
    return shard_map, per_bench, shards


def default_benches(ctx: Context) -> list[str]:
    from kperf.history import asvrun

    if ctx.cpu_only:
        print("No GPU: only the CPU-side suites (static figures, compile times) are run.")
    return asvrun.default_benches(not ctx.cpu_only)


def print_plan(shard_map: ShardMap, gpus: Sequence[Gpu], selected: Sequence[str],
               shards: Sequence[Shard]) -> None:
    counts = shard_map.counts(selected)
    running = {s.gpu.uuid for s in shards}
    print(f"{len(selected)} case(s) over {len(gpus)} GPU(s) of {shard_map.host}:")
    for g in gpus:
        mark = "" if g.uuid in running else "  (not run)"
        print(f"  GPU {g.label:<12} {shard_map.gpus[g.uuid]['machine']:<40} "
              f"{counts[g.uuid]:>5} case(s){mark}")


# --------------------------------------------------------------------------- commands


def cmd_gpus(args: argparse.Namespace) -> int:
    host = args.host or machine_tool.host_name()
    for g in enumerate_gpus():
        name = machine_tool.machine_name(host, g.model, g.uuid)
        print(f"GPU {g.label:<12} {g.vendor:<7} {g.model:<24} {g.uuid}  -> {name}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    ctx = context(args)
    prepare(ctx, args, ctx.results_dir, save=True)
    print(f"assignment: {ctx.map_path}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from kperf.history.asvrun import asv_env, publish_site, run_asv

    ctx = context(args)
    _, _, shards = prepare(ctx, args, ctx.results_dir, save=True)
    revisions = range_arg(ctx.repo, args.range)

    def job(shard: Shard) -> int:
        shard_results = shard.work_dir / "results"
        link_results(shard_results, ctx.results_dir, shard.machine)
        conf_path = config_for(ctx.conf, ctx.repo, shard.work_dir, results_dir=shard_results,
                               env_dir=shard.env_dir)
        env = asv_env(shard.machine, ctx.repo, cpu_only=ctx.cpu_only)
        env.update(shard.environment())
        run_args = ["--config", str(conf_path), "run", "--machine", shard.machine,
                    "--record-samples", "--show-stderr", revisions]
        for regex in shard.regexes:
            run_args += ["-b", regex]
        log = shard.work_dir / "asv.log"
        log.unlink(missing_ok=True)
        return run_asv(run_args, env, ctx.repo, log=log).returncode

    codes = run_parallel(shards, job, lambda s: s.work_dir / "asv.log")
    # 2: some benchmark failed (recorded); 1 with NEW: nothing new for that GPU's machine
    fine = {0, 2} | ({1} if args.range == "NEW" else set())
    broken = {label: rc for label, rc in codes.items() if rc not in fine}
    for shard in shards:
        if codes[shard.gpu.label] != 0:
            print(f"--- GPU {shard.gpu.label}: last lines of {shard.work_dir / 'asv.log'}\n"
                  f"{log_tail(shard.work_dir / 'asv.log')}", file=sys.stderr)
    if broken:
        print(f"asv run failed on GPU(s) {broken}; nothing published", file=sys.stderr)
        return max(broken.values())
    if not args.no_publish:
        env = asv_env(shards[0].machine, ctx.repo, cpu_only=ctx.cpu_only)
        pub = publish_site(env, ctx.repo, ["--config", str(ctx.conf_path)],
                           ctx.repo / ctx.conf.get("html_dir", "html"),
                           Path(env["KPERF_RECORD_DIR"]))
        if pub != 0:
            return pub
    return 2 if 2 in codes.values() else 0


def range_arg(repo: Path, range_spec: str | None) -> str:
    """asv's range argument: HEAD by default, else the range as given (A..B, NEW, ALL,
    HASHFILE:...), the same for every shard."""
    if range_spec:
        return range_spec
    return f"{asvio.git(repo, 'rev-parse', 'HEAD')}^!"


# --------------------------------------------------------------------------- the gate


def cmd_gate(args: argparse.Namespace) -> int:
    """The PR gate (kperf.gate) with one lane per GPU: each GPU measures the cases the
    assignment gives it, base and head side by side on that GPU, all GPUs at once; the
    cases are decided together (one correction) and the report names each case's GPU."""
    from kperf.gate import cli as gate_cli

    return gate_cli.run(args, sharded_plan, gpu_column=True)


def sharded_plan(args: argparse.Namespace, repo: Path, pr_dir: Path, th: Thresholds):
    """The gate's plan with one lane per GPU that owns a selected case."""
    from kperf.gate import cli as gate_cli
    from kperf.gate.plan import Lane

    args.repo = repo
    ctx = context(args)
    plan = gate_cli.plan_run(args, repo, pr_dir, th)
    infos = describe_machines(ctx.gpus, ctx.host)
    machines = {uuid: info["machine"] for uuid, info in infos.items()}
    every = [c["name"] for c in gate_cli.suite_cases(repo)]
    shard_map, notes = update_map(ctx.recorded, ctx.gpus, machines, every, ctx.host,
                                  args.reassign, ctx.map_path)
    for note in notes:
        print(f"shards: {note}")
    # a toolchain's copy of a case (``<case> [<toolchain>]``) goes where its suite case goes
    owner = {c["name"]: shard_map.cases.get(c.get("suite_case", c["name"])) for c in plan.cases}
    selected = list(owner)
    wanted = [g for g in ctx.gpus if not args.only or any(is_gpu(g, o) for o in args.only)]
    plan.lanes = [Lane(g.label, machine_tool.gpu_visibility_env(g.index, {}),
                       [c for c in selected if owner[c] == g.uuid])
                  for g in wanted]
    plan.lanes = [lane for lane in plan.lanes if lane.cases]
    judged = {name for lane in plan.lanes for name in lane.cases}
    plan.cases = [c for c in plan.cases if c["name"] in judged]
    if not plan.lanes:
        raise ShardError(f"none of the {len(selected)} selected case(s) is assigned to the "
                         f"GPU(s) chosen with --only {args.only}")
    plan.machine = f"{len(plan.lanes)} GPU(s) of {ctx.host}, each judging its own cases"
    return plan


# --------------------------------------------------------------------------- CLI


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="repository root (cwd)")
    parser.add_argument("--config", type=Path, help="asv config (default <repo>/asv.conf.json)")
    parser.add_argument("--host", help="host part of the machine names and of the assignment "
                                       "file (default: this host's name; CI: a stable label)")
    parser.add_argument("--shard-file", type=Path,
                        help="assignment file (default <results_dir>/shards/<host>.shardmap)")
    parser.add_argument("--reassign", metavar="REASON",
                        help="accept a changed GPU set; the reason is recorded with the moves")
    parser.add_argument("--only", action="append", metavar="GPU",
                        help="run only this GPU's cases (index, UUID or its suffix); "
                             "the assignment still spans every GPU")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kperf.history.shard",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    gpus = sub.add_parser("gpus", help="list the GPUs and their machine names")
    gpus.add_argument("--host")
    for name, text in (("plan", "show (and record) the assignment"),
                       ("run", "run the shards in parallel, then asv publish")):
        p = sub.add_parser(name, help=text)
        _common(p)
        p.add_argument("-b", "--bench", action="append", help="asv benchmark regex")
        if name == "run":
            p.add_argument("--range", help="asv range: A..B, NEW, ALL, HASHFILE:f "
                                           "(default: HEAD only)")
            p.add_argument("--no-publish", action="store_true")
    g = sub.add_parser("gate", help="the PR gate with every GPU judging its own cases "
                                    "(options and exit codes as kperf gate)")
    _common(g)
    add_gate_options(g)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"gpus": cmd_gpus, "plan": cmd_plan, "run": cmd_run, "gate": cmd_gate}
    try:
        return handlers[args.command](args)
    except (ShardError, GateError, PathError) as err:
        print(f"shard: {err}", file=sys.stderr)
        # `gate` reports its own errors (a ShardError too) through the gate's exit codes
        return err.exit_code if isinstance(err, GateError) and not isinstance(
            err, ShardError) else 2


if __name__ == "__main__":
    sys.exit(main())
