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
import tempfile

from tools import machine as machine_tool
from tools.asvrun import CPU_SUITES, REPO, asv_env, has_gpu, run_asv


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

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(commits(args.range)) + "\n")
        hashfile = f.name
    run_args = ["run", "--machine", info["machine"], "--record-samples", "--show-stderr",
                f"HASHFILE:{hashfile}"]
    for regex in benches:
        run_args += ["-b", regex]
    rc = run_asv(run_args, env).returncode
    if rc not in (0, 2):
        print(f"asv run failed (exit {rc}); nothing to publish", file=sys.stderr)
        return rc
    if rc == 2:
        print("some benchmarks failed; their errors are above and in .asv/results", file=sys.stderr)
    if not args.no_publish:
        pub = run_asv(["publish"], env).returncode
        if pub != 0:
            return pub
        from tools.telemetry_pages import write_telemetry_pages

        pages = write_telemetry_pages(REPO / "html", REPO / ".asv" / "records")
        print(f"site: {REPO / 'html' / 'index.html'}  (serve with: python -m asv preview)")
        print(f"clocks and throttle state per sample: {pages}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
