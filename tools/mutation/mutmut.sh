#!/usr/bin/env bash
# mutmut (pinned: pyproject.toml's "mutation" extra) over the decision modules that
# pyproject.toml [tool.mutmut] names, with the tests it names; its score and survivors
# are in docs/reliability.md ("mutmut").
#   bash tools/mutation/mutmut.sh [CHILDREN]      # then: .cache/mutmut/bin/mutmut results
# mutmut copies the tree to mutants/ and imports the mutated kperf from there. asv's
# discovery (tests of the history's thresholds) takes the suite's parent folder off
# sys.path, which here is mutants/ itself, so kperf is also reached through a folder of its
# own (.cache/mutmut/path/kperf -> mutants/kperf). The project's .venv provides the stack.
set -euo pipefail
cd "$(dirname "$0")/../.."
children=${1:-2}
venv=.cache/mutmut
if ! [ -x "$venv/bin/mutmut" ]; then
  .venv/bin/python -m venv "$venv"
  "$venv/bin/pip" install -q "mutmut==3.8.1" "pytest==9.0.3"  # the dev stack's pytest
fi
site=$("$venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
.venv/bin/python -c 'import site; print(site.getsitepackages()[0])' > "$site/kperf-stack.pth"
mkdir -p "$venv/path"
ln -sfn "$PWD/mutants/kperf" "$venv/path/kperf"
echo "$PWD/$venv/path" > "$site/zz-kperf-mutants.pth"
export TRITON_CACHE_DIR=$PWD/.cache/mutmut/triton TILELANG_CACHE_DIR=$PWD/.cache/mutmut/tilelang
"$venv/bin/mutmut" run --max-children "$children"
