#!/usr/bin/env bash
# Install the site's pinned scripts and styles (tools/site/package-lock.json) into
# .cache/site-assets/node_modules, where tools/site/publish.py copies them from into html/vendor/.
# Idempotent: reinstalls only when the lockfile changed. On a runner without npm or
# without the registry: the offline bundle carries them (tools/stacks/offline_bundle.py;
# tools/offline_env.sh sets KPERF_SITE_ASSETS), or copy .cache/site-assets from a machine
# that has it, or point KPERF_SITE_ASSETS at such a node_modules folder (docs/site.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.cache/site-assets
stamp=$dest/.lock-sha256
want=$(sha256sum tools/site/package-lock.json | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && [ -d "$dest/node_modules" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "warning: npm not found; the site's scripts cannot be installed, so asv's pages" \
       "will need a CDN (docs/site.md)" >&2
  exit 1
fi
mkdir -p "$dest"
cp tools/site/package.json tools/site/package-lock.json "$dest/"
npm ci --silent --no-audit --no-fund --ignore-scripts --prefix "$dest"
echo "$want" > "$stamp"
