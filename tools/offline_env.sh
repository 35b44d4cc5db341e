#!/usr/bin/env bash
# Source on an offline GPU machine whose Python already holds torch and Triton:
#   source tools/offline_env.sh BUNDLE.tar.xz WHEELDIR
# BUNDLE is a tar.xz of unpacked wheels (TileLang and its native deps, asv and its deps)
# and of the site's scripts and styles (kperf-site-assets/: kperf/stacks/offline_bundle.py);
# WHEELDIR holds asv_runner's wheels for asv's environments.
set -e
bundle=${1:?usage: source tools/offline_env.sh BUNDLE.tar.xz WHEELDIR}
wheels=${2:?usage: source tools/offline_env.sh BUNDLE.tar.xz WHEELDIR}
site=${KPERF_SITE:-/tmp/site}
if [ ! -d "$site" ]; then
  mkdir -p "$site"
  tar -xJf "$bundle" -C "$site"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# the site published here loads its scripts and styles from the bundle, not from a CDN
if [ -d "$site/kperf-site-assets" ]; then
  export KPERF_SITE_ASSETS="$site/kperf-site-assets"
else
  echo "warning: $site has no kperf-site-assets/ (unpacked from an older bundle?): the" \
       "site will load its scripts from a CDN; remove $site to unpack this bundle" >&2
fi
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$(cd "$wheels" && pwd)" PIP_DISABLE_PIP_VERSION_CHECK=1
export VIRTUALENV_NO_PERIODIC_UPDATE=1 VIRTUALENV_DOWNLOAD=0
set +e
