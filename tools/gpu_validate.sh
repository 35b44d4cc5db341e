#!/usr/bin/env bash
# One batch of GPU checks and timings on an offline GPU machine (used on the H200).
#   OUT=dir bash tools/gpu_validate.sh STEP...   steps: info tests perf:<ops>[:cases] asv:<regex>
# Needs .gpu/site.tar.xz and .gpu/asvwhl (see tools/offline_env.sh); writes under $OUT.
set -u
out=${OUT:?set OUT}
source tools/offline_env.sh .gpu/site.tar.xz .gpu/asvwhl
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
if ! git rev-parse HEAD >/dev/null 2>&1; then
  git init -q && git add -A && git -c user.email=k@p -c user.name=kperf commit -qm snapshot
fi
git -c user.email=k@p -c user.name=kperf stash -u -q 2>/dev/null  # measure the committed code only, not work in progress
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case $step in
    info)
      nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
      python3 -c "import torch, triton, tilelang; print(torch.__version__, triton.__version__, tilelang.__version__)"
      git log --oneline | head -3 ;;
    tests)
      python3 -m pytest -q -m gpu -p no:cacheprovider tests/ 2>&1 | tee "$out/gpu_tests.txt" | tail -30 ;;
    noise)
      python3 -m tools.noise collect --out "$out/noise.json" ;;
    perf:*)
      IFS=: read -r _ ops cases <<<"$step"
      python3 -m tools.perf --ops "$ops" ${cases:+--cases "$cases"} --out "$out/perf_${ops//,/_}.json" \
        --markdown "$out/perf_${ops//,/_}.md" 2>&1 | tail -60 ;;
    asv:*)
      regex=${step#asv:}
      /usr/bin/time -f "asv wall %e s" python3 -m tools.bench --no-publish -b "$regex" 2>&1 | tail -40
      tar -czf "$out/asv_results.tgz" .asv/results .asv/records ;;
  esac
done
echo "=== done $(date -u +%H:%M:%S)"
