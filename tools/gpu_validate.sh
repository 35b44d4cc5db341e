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
    perf:*)  # perf:<ops>[:cases[:per-op]]
      IFS=: read -r _ ops cases per_op <<<"$step"
      timeout "${STEP_TIMEOUT:-300}" python3 -m tools.perf --ops "$ops" ${cases:+--cases "$cases"} \
        --per-op "${per_op:-2}" --plan '{"trials": 6}' --out "$out/perf.json" \
        --markdown "$out/perf.md" > "$out/perf.log" 2>&1
      grep -v TileLang "$out/perf.log" | tail -50 ;;
    sampler)
      python3 -m tools.noise collect --kinds gemm --sampler-only --rounds 16 \
        --out "$out/sampler.json" 2>&1 | tail -3 ;;
    gate-aa:*)  # an A/A gate run: HEAD against an empty commit on top of it
      regex=${step#gate-aa:}
      git -c user.email=k@p -c user.name=kperf commit -q --allow-empty -m "A/A: no change"
      /usr/bin/time -f "gate wall %e s" timeout "${STEP_TIMEOUT:-300}" python3 -m tools.gate \
        --base HEAD~1 --head HEAD -b "$regex" --rounds 3 --label sm_90 --out "$out/gate" \
        > "$out/gate.log" 2>&1
      echo "gate exit $?"; tail -5 "$out/gate.log"; cat "$out/gate/gate.md" 2>/dev/null | head -30 ;;
    asv:*)
      regex=${step#asv:}
      /usr/bin/time -f "asv wall %e s" python3 -m tools.bench --no-publish -b "$regex" 2>&1 | tail -40
      tar -czf "$out/asv_results.tgz" .asv/results .asv/records ;;
  esac
done
echo "=== done $(date -u +%H:%M:%S)"
