#!/usr/bin/env bash
# Set up and run the main job: benchmark the current commit, publish html/.
# Without a GPU it runs the CPU-side suites (compile times, gfx942/sm_90a static
# figures) and says so. Extra arguments go to kperf/history/bench.py (e.g. --range A..B, -b REGEX).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_env.sh
exec .venv/bin/kperf run "$@"
