#!/usr/bin/env bash
# Set up and run the tests: lint, then pytest (GPU-only tests skip on CPU with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_env.sh
export TRITON_DEFAULT_FP_FUSION=1
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
