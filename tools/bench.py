"""The main job: benchmark the current commit (or a range) and publish the site.

    python -m tools.bench                 # HEAD, all suites this machine can run
    python -m tools.bench --range A..B    # every commit of a range
    python -m tools.bench -b GemmTime     # a subset (asv -b regex)

Without a GPU it runs the CPU-side suites (compile times and gfx942/sm_90a static
figures) and says so. Results go to .asv/results, per-sample records to .asv/records,
and the site to html/.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from tools import machine as machine_tool
from tools.asvrun import CPU_SUITES, REPO, asv_env, has_gpu, run_and_publish, write_hashfile


def commits(range_spec: str | None) -> list[str]:
    if not range_spec:
        return [subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=REPO, text=True).strip()]
    out = subprocess.check_output(["git", "rev-list", "--reverse", range_spec], cwd=REPO, text=True)
    return out.split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--range", help="git revision range (default: HEAD only)")
    parser.add_argument("-b", "--bench", action="append", help="asv benchmark regex")
    parser.add_argument("--machine", help="machine name (default: derived from host and GPU)")
    parser.add_argument("--no-publish", action="store_true")
    args = parser.parse_args(argv)

    gpu = has_gpu()
    info = machine_tool.describe(args.machine)
    machine_tool.write_machine_file(info)
    benches = args.bench or ([] if gpu else [CPU_SUITES])
    if gpu:
        print(f"GPU: {info['gpu']} ({info['gpu_arch']}); machine {info['machine']!r}")
    else:
        print("No GPU found: running only the CPU-side benchmarks (compile times and "
              "gfx942 / sm_90a static figures). GPU timings need a CUDA or ROCm GPU.")
    env = asv_env(info["machine"], cpu_only=not gpu)

    with write_hashfile(commits(args.range)) as hashfile:
        run_args = ["run", "--machine", info["machine"], "--record-samples", "--show-stderr",
                    f"HASHFILE:{hashfile}"]
        for regex in benches:
            run_args += ["-b", regex]
        return run_and_publish(run_args, env, REPO, [], REPO / "html",
                               REPO / ".asv" / "records", publish=not args.no_publish)


if __name__ == "__main__":
    sys.exit(main())
