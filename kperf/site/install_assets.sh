#!/usr/bin/env bash
# Install the site's pinned scripts and styles (kperf/site/package-lock.json) into the
# project's .cache/site-assets/node_modules (run in the project's folder), where
# kperf/site/publish.py copies them from into html/vendor/.
# Idempotent: reinstalls only when the lockfile changed. On a runner without npm or
# without the registry: the offline bundle carries them (kperf/stacks/offline_bundle.py;
# tools/offline_env.sh sets KPERF_SITE_ASSETS), or copy .cache/site-assets from a machine
# that has it, or point KPERF_SITE_ASSETS at such a node_modules folder (docs/site.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=.cache/site-assets
stamp=$dest/.lock-sha256
want=$(sha256sum "$here/package-lock.json" | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && [ -d "$dest/node_modules" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "warning: npm not found; the site's scripts cannot be installed, so asv's pages" \
       "will need a CDN (docs/site.md)" >&2
  exit 1
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
npm ci --silent --no-audit --no-fund --ignore-scripts --prefix "$dest"
echo "$want" > "$stamp"
