"""The ``kperf`` command: one entry point, a verb per job.

    kperf init                  set up this repository for kperf (kperf.toml, asv, CI)
    kperf new-op NAME --like OP a new op from a template, with its benchmark file
    kperf check                 every op declared and its benchmark file in step
    kperf run                   benchmark this commit (or --range A..B) and publish html/
    kperf gate                  the PR gate: merge-base against HEAD, an exit code, gate.md
    kperf codegen pr|nightly    the gate and the history of generated code, on a CPU
    kperf publish               rebuild the site from what is recorded
    ...

Each verb is a module of kperf with its own ``--help``; nothing is imported until a
verb is chosen, so ``kperf --help`` answers at once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# verb: (module with main(argv) -> int, one line of help); in the order --help lists them
VERBS: dict[str, tuple[str, str]] = {
    "init": ("kperf.init", "set up this repository for kperf: kperf.toml, asv.conf.json, "
                           "benchmarks/, thresholds, a test, the CI workflows"),
    "new-op": ("kperf.newop", "a new op from a template (--like OP): its folder, its "
                              "benchmark file; then only its kernels and cases are yours"),
    "check": ("kperf.check", "every op declares its class and its benchmark file lists its "
                             "cases, dtypes and backends (a test runs it too)"),
    "run": ("kperf.history.bench", "benchmark this commit (or --range A..B) with asv and "
                                   "publish the site; without a GPU, the CPU-side suites"),
    "gate": ("kperf.gate.cli", "the PR gate: base against head, a verdict per case, "
                               "gate.md and an exit code (0 pass, 1 slower, 2 broken, "
                               "3 undecided, 4 failed)"),
    "codegen": ("kperf.stacks.codegen_runner", "gfx942 and sm_90a code on a CPU: `pr` gates "
                                               "it, `nightly` records its history"),
    "publish": ("kperf.site.publish", "build html/ from the recorded results (asv publish "
                                      "and kperf's pages), offline"),
    "perf": ("kperf.history.perf", "head to head now: TileLang, Triton and the baseline per "
                                   "case, on this GPU"),
    "bisect": ("kperf.history.bisect", "find the commit of a regression in the history "
                                       "(asv find)"),
    "stacks": ("kperf.stacks.matrix", "the same commit under other Triton / TileLang / ROCm "
                                      "releases (asv's matrix)"),
    "compare-stacks": ("kperf.stacks.stackcmp", "judge two stacks' results like a PR"),
    "upgrade": ("kperf.stacks.upgrade", "before you upgrade Triton, TileLang or a gfx942 "
                                        "toolchain: what it does to every kernel's code"),
    "toolchain": ("kperf.toolchains", "fetch and check the pinned gfx942 "
                                                 "toolchains"),
    "bundle": ("kperf.stacks.offline_bundle", "what an offline GPU runner needs, as one "
                                              "bundle"),
    "thresholds": ("kperf.history.history_thresholds", "the history's thresholds from A/A "
                                                       "runs (--write)"),
    "records": ("kperf.history.records_archive", "pack and unpack the per-sample records "
                                                 "of a results branch"),
    "machine": ("kperf.machine", "what this machine and its stack are (asv's machine file)"),
}


def usage() -> str:
    width = max(map(len, VERBS))
    lines = ["usage: kperf VERB [options]   (kperf VERB --help for a verb's options)", "",
             "Performance-regression tracking for TileLang and Triton GPU kernels, on asv.",
             "", "verbs:"]
    lines += [f"  {verb:<{width}}  {text}" for verb, (_, text) in VERBS.items()]
    lines += ["", "In a repository set up by `kperf init` (kperf.toml); docs/teams.md."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if args[0] in ("-V", "--version"):
        from kperf import __version__

        print(f"kperf {__version__}")
        return 0
    verb, rest = args[0], args[1:]
    if verb not in VERBS:
        print(f"kperf: no verb {verb!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(VERBS[verb][0])
    sys.argv[0] = f"kperf {verb}"  # what argparse calls the program in its usage lines
    code = module.main(rest)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
