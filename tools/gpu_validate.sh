#!/usr/bin/env bash
# One batch of GPU checks and timings on an offline GPU machine (used on the H200).
#   OUT=dir bash tools/gpu_validate.sh STEP...
# Steps (each bounded by STEP_TIMEOUT seconds, default 300; outputs under $OUT):
# At most 8 files come back from a call: steps tar their logs with their data.
#   info                       GPU, driver, clocks, versions
#   tests[:<expr>]             the GPU-only pytest tests (those pytest -k <expr> selects), with
#                              what they print (-s)
#   noise                      tools.lab.noise collect (gate statistics offline)
#   sampler                    paired sampler A/B (SAMPLER_PAIRS per kernel, default 60)
#   perf:<ops>[:cases[:per-op[:dtypes]]]   kperf.history.perf (PERF_PLAN, PERF_VARIANTS: JSON)
#   asv[@seconds]:<regex>      kperf.history.bench --no-publish on matching benchmarks (asv merges the
#                              results of several such steps for one commit; a step cut off
#                              keeps none of its asv results, only the harness's records, so
#                              each must fit its call; @seconds: this step's own limit
#                              instead of STEP_TIMEOUT)
#   codegen[@seconds]:<regex>  what this machine builds of the code figures and what it leaves
#                              to another (kperf.history.asvrun.codegen_selection), then asv on
#                              <regex> plus those figures, packed with a git bundle of HEAD: a GPU
#                              machine's history to publish beside the CPU codegen runner's
#   cold                       removes the compile caches (.cache) and asv's environments
#   next-commit                an empty commit: the next asv step measures a new commit whose
#                              kernels and baselines are unchanged (a day's ordinary commit)
#   gate:<aa|edit|inject|again|resume>[:regex]   kperf.gate HEAD~1 -> HEAD (default: the PR subset),
#                              where aa commits comment-only edits of every kernel file, edit
#                              of one op's (GATE_EDIT_OP, default fp8_gemm: the other ops' cases
#                              are SAME unmeasured), inject one that
#                              grows GEMM square-8192's K by 2.3% (a power-capped GEMM) and RMSNorm
#                              llama3-8b.hidden's rows by 1% (a bandwidth-bound op) and edits every
#                              other kernel file's comments, so the other ops' cases are measured as
#                              an A/A beside them (until 2026-12-03 it grew K by 3.1% and softmax
#                              logits-4k's rows by 1% and dropped the FP8 GEMMs' grouped tile order,
#                              the other ops left unmeasured); again reruns the last comparison (a new device call
#                              re-sends the working tree, which this script then commits on top:
#                              "again" in a later call compares that commit with the last one), resume
#                              goes on with a gate the call's limit cut off
#                              (GATE_THRESHOLDS: another thresholds.json, e.g. a smaller
#                              gate_wall_s to fit a device call)
#   asv-edit:<op>:<regex>      commits a new source for <op>'s Triton kernel (a comment in its
#                              @triton.jit body, which Triton's cache key hashes), then asv on
#                              <regex>; prints each case's "kperf: ... compiled / from the
#                              compile cache" line: only <op>'s Triton cases should compile
#   history:<patch>:<regex>    a two-commit history as a user's nightly run makes it: asv on
#                              <regex> at the tree as sent, then <patch> (git apply; e.g.
#                              tools/lab/edits/two-kernels-slower.patch) committed and asv again,
#                              publishing the site: history.tgz has both commits' results and
#                              records, html/ and a git bundle of the commits (asv publish
#                              needs them); HISTORY_FIRST_S bounds the first asv (default STEP_TIMEOUT)
#   blocks:<file>              tools.lab.blocks experiments (noise structure, an energy edit)
#   probe                      how often NVML's energy counter moves under load
#   ctxprobe                   does a process that only imports torch, triton and tilelang (a
#                              gate worker's "warm") hold a CUDA context on the GPU?
#   stack:<regex>              the benchmarks under each site dir of STACK_SITES (default
#                              "/tmp/site14 /tmp/site15": two TileLang releases), one asv
#                              machine per stack, then kperf.stacks.stackcmp first -> last
# Needs KPERF_BUNDLE (default .gpu/site.tar.xz) and .gpu/asvwhl (see tools/offline_env.sh).
set -u
out=${OUT:?set OUT}
source tools/offline_env.sh "${KPERF_BUNDLE:-.gpu/site.tar.xz}" .gpu/asvwhl
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
# the measurement workers' folder (kperf/core/worker.py), where their logs are collected from
export KPERF_WORKER_DIR=${KPERF_WORKER_DIR:-$(mktemp -d /tmp/kperf-w-XXXXXX)}
worker_logs() { find "$KPERF_WORKER_DIR" -name '*.log' -exec cp --backup=numbered -t "$1" {} +; }
# Its own repository: a copy sent inside another checkout (a folder of it) would otherwise
# commit into that one, and asv's "repo": "." could not clone the folder.
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ]; then
  git init -q && git add -A && git -c user.email=k@p -c user.name=kperf commit -qm snapshot
fi
commit() { git -c user.email=k@p -c user.name=kperf commit -q "$@"; }
# The machine gets the working tree but not necessarily its history: asv measures commits,
# so the tree as sent becomes one (a stash here would measure a stale HEAD instead).
git add -A && { git diff --cached --quiet || commit -m "working tree as sent"; }
limit=${STEP_TIMEOUT:-300}
run_asv() {  # the current commit's benchmarks matching $1 (limit $2 s), log in $out/asv.log
  # each line stamped with the time it came: where asv's own start-up goes
  { /usr/bin/time -f "asv wall %e s" timeout "${2:-$limit}" python3 -m kperf.history.bench --no-publish \
    -b "$1" 2>&1; } | while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done \
    > "$out/asv.log"
}
pack_asv() {  # results, records, the log and the workers' logs: one file per asv step
  mkdir -p "$out/worker-logs" && worker_logs "$out/worker-logs"
  local n; n=$(ls "$out"/asv-*.tgz 2>/dev/null | wc -l)
  local kept=(.asv/results .asv/records)
  [ -d .asv/compile-records ] && kept+=(.asv/compile-records)
  [ -d .asv/codegen-records ] && kept+=(.asv/codegen-records)
  tar -czf "$out/asv-$n.tgz" "${kept[@]}" -C "$out" asv.log worker-logs \
    && rm -r "$out/asv.log" "$out/worker-logs"
}
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case $step in
    info)
      nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
      python3 -c "import torch, triton, tilelang; print(torch.__version__, triton.__version__, tilelang.__version__)"
      git log --oneline | head -3 ;;
    tests|tests:*)
      select=${step#tests}; select=${select#:}
      timeout "$limit" python3 -m pytest -q -m gpu -p no:cacheprovider ${select:+-k "$select"} \
        -s tests/ > "$out/gpu_tests${select:+-some}.txt" 2>&1
      grep -E "^(PASSED|FAILED)|passed|failed|^E " "$out/gpu_tests${select:+-some}.txt" | tail -30 ;;
    noise)
      timeout "$limit" python3 -m tools.lab.noise collect --out "$out/noise.json" ;;
    sampler)
      timeout "$limit" python3 -m tools.lab.noise collect --kinds gemm,copy --sampler-only \
        --sampler-pairs "${SAMPLER_PAIRS:-60}" --out "$out/sampler.json" 2>&1 | tail -3 ;;
    perf:*)
      IFS=: read -r _ ops cases per_op dtypes <<<"$step"
      tag=${ops//,/+}
      timeout "$limit" python3 -m kperf.history.perf --ops "$ops" ${cases:+--cases "$cases"} \
        --per-op "${per_op:-2}" ${dtypes:+--dtypes "$dtypes"} --plan "${PERF_PLAN:-{\"trials\": 6\}}" \
        ${PERF_VARIANTS:+--variants "$PERF_VARIANTS"} --timeout "${CASE_TIMEOUT:-120}" \
        --out "$out/perf-$tag.json" > "$out/perf-$tag.log" 2>&1
      grep -v TileLang "$out/perf-$tag.log" | tail -40 ;;
    asv:*|asv@*)
      head=${step%%:*}; own=${head#asv}; own=${own#@}
      run_asv "${step#*:}" "$own"; tail -25 "$out/asv.log"; pack_asv ;;
    codegen:*|codegen@*)
      head=${step%%:*}; own=${head#codegen}; own=${own#@}
      made=$(python3 -c "
import json, sys
from kperf.history.asvrun import codegen_selection
made, left_out = codegen_selection()
json.dump({'built_here': made, 'left_out': left_out}, open('$out/codegen-selection.json', 'w'), indent=1)
print('|'.join(made))")
      cat "$out/codegen-selection.json"
      run_asv "${step#*:}${made:+|$made}" "$own"; tail -25 "$out/asv.log"
      git bundle create -q "$out/repo.bundle" HEAD; pack_asv ;;
    cold)
      rm -rf .cache .asv/env && echo "compile caches and asv environments removed" ;;
    next-commit)
      commit --allow-empty -m "an ordinary commit: no kernel or baseline changed"
      git log --oneline | head -1 ;;
    asv-edit:*)
      IFS=: read -r _ op regex <<<"$step"
      python3 - "kernels/$op/triton_$op.py" <<'EDIT'
import re, sys, time
path = sys.argv[1]
text = open(path).read()
head = re.search(r"@triton\.jit\n(?:\s*@.*\n)*def [^(]*\((?:[^)]|\n)*\)[^:]*:\n", text)
assert head, f"{path}: no @triton.jit function"
edited = text[:head.end()] + f"    # edited {time.strftime('%H:%M:%S')}\n" + text[head.end():]
open(path, "w").write(edited)
EDIT
      commit -am "edit: a new source for $op's Triton kernel (a comment in its body)"
      run_asv "$regex"; grep -E "kperf: |asv wall" "$out/asv.log" | sed 's/^[0-9:]* //' | sort -u \
        | tail -60; pack_asv ;;
    history:*)
      IFS=: read -r _ patch regex <<<"$step"
      run_asv "$regex" "${HISTORY_FIRST_S:-$limit}"; grep -E "asv wall|failed" "$out/asv.log" | tail -5
      mv "$out/asv.log" "$out/asv-first.log"
      git apply "$patch" && commit -am "edit: $patch" || { echo "history: $patch did not apply"; continue; }
      { /usr/bin/time -f "asv wall %e s" timeout "$limit" python3 -m kperf.history.bench \
        -b "$regex" 2>&1; } > "$out/asv-second.log"
      grep -E "asv wall|failed|regress" "$out/asv-second.log" | tail -8
      mkdir -p "$out/worker-logs" && worker_logs "$out/worker-logs"
      git bundle create -q "$out/repo.bundle" HEAD
      tar -czf "$out/history.tgz" .asv/results .asv/records html -C "$out" asv-first.log \
        asv-second.log worker-logs repo.bundle \
        && rm -r "$out/asv-first.log" "$out/asv-second.log" "$out/worker-logs" "$out/repo.bundle"
      ls -la "$out/history.tgz" ;;
    blocks:*)
      timeout "$limit" python3 -m tools.lab.blocks --file "${step#blocks:}" --out "$out/blocks"
      tar -czf "$out/blocks.tgz" -C "$out" blocks && rm -r "$out/blocks" ;;
    probe)
      timeout 60 python3 -m tools.lab.blocks --energy-probe --out "$out/probe.json" ;;
    ctxprobe)
      for mods in torch torch,triton torch,triton,tilelang; do
        python3 -c "import importlib, time
for m in '$mods'.split(','): importlib.import_module(m)
print('imported $mods', flush=True); time.sleep(30)" &
        pid=$!; sleep 25  # the imports take 10-15 s
        echo "$mods (pid $pid): $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | grep -w $pid || echo 'no CUDA context')"
        kill $pid 2>/dev/null; wait $pid 2>/dev/null
      done ;;
    gate:*)
      IFS=: read -r _ mode regex <<<"$step"
      case $mode in
        aa)
          for f in kernels/*/tilelang_*.py kernels/*/triton_*.py; do
            printf '\n# A/A: a comment-only change\n' >> "$f"; done
          commit -am "A/A: comment-only changes in every kernel file" ;;
        edit)  # a PR that touches one op: only its cases are measured (docs/gate.md)
          op=${GATE_EDIT_OP:-fp8_gemm}
          for f in kernels/"$op"/tilelang_*.py kernels/"$op"/triton_*.py; do
            printf '\n# a comment-only change of one op\n' >> "$f"; done
          commit -am "one op edited, comments only: $op" ;;
        inject)
          for f in kernels/*/tilelang_*.py kernels/*/triton_*.py; do
            printf '\n# injected run: a comment-only change\n' >> "$f"; done
          sed -i 's/Case("square-8192", {"M": 8192, "N": 8192, "K": 8192}/Case("square-8192", {"M": 8192, "N": 8192, "K": 8384}/' kernels/gemm/spec.py
          sed -i 's/Case("llama3-8b.hidden", {"M": 16384, "N": 4096}/Case("llama3-8b.hidden", {"M": 16548, "N": 4096}/' kernels/rmsnorm/spec.py
          grep -q '"K": 8384' kernels/gemm/spec.py && grep -q '"M": 16548' kernels/rmsnorm/spec.py \
            || echo "inject: a spec did not change (its line moved?)"
          git diff --stat | tail -1
          commit -am "injected: square-8192 K +2.3%, RMSNorm llama3-8b.hidden rows +1%, comments elsewhere" ;;
      esac
      n=$(ls -d "$out"/gate-* 2>/dev/null | wc -l)
      flags=(--base HEAD~1 --head HEAD --label sm_90 --pr-dir .asv/pr-gate --out .asv/pr-gate)
      [ "$mode" = resume ] && flags=(--resume --label sm_90 --pr-dir .asv/pr-gate --out .asv/pr-gate)
      /usr/bin/time -f "gate wall %e s" timeout "$limit" python3 -m kperf.gate "${flags[@]}" \
        ${regex:+-b "$regex"} ${GATE_THRESHOLDS:+--thresholds "$GATE_THRESHOLDS"} > "$out/gate.log" 2>&1
      echo "gate exit $?"; grep -E "^round|^pair|re-measuring|wall" "$out/gate.log" | tail -30
      sed -n '3,3p;8,40p' .asv/pr-gate/gate.md 2>/dev/null
      grep -v "| SAME |" .asv/pr-gate/rounds.md 2>/dev/null | sed -n '7,30p'  # what was undecided
      cp "$out/gate.log" .asv/pr-gate/
      mkdir -p .asv/pr-gate/worker-logs  # each pair's start-up and preparation, per worker
      worker_logs .asv/pr-gate/worker-logs
      tar -czf "$out/gate-$n-$mode.tgz" --exclude pr-gate/sides -C .asv pr-gate && rm "$out/gate.log" ;;
    stack:*)
      regex=${step#stack:}
      sites=(${STACK_SITES:-/tmp/site14 /tmp/site15})
      for site in "${sites[@]}"; do
        PYTHONPATH=$site timeout "$limit" python3 -m kperf.stacks.matrix image --no-publish \
          -b "$regex" -a rounds=2 >> "$out/stack.log" 2>&1
        echo "$site: asv exit $?"; grep "^matrix: stack" "$out/stack.log" | tail -1
      done
      v() { PYTHONPATH=$1 python3 -c "import tilelang; print(tilelang.__version__)"; }
      python3 -m kperf.stacks.stackcmp --base "tilelang=$(v "${sites[0]}")" \
        --head "tilelang=$(v "${sites[-1]}")" --label "TileLang $(v "${sites[0]}") -> $(v "${sites[-1]}")" \
        --out "$out/stackcmp" > "$out/stackcmp.log" 2>&1
      echo "stackcmp exit $?"; tail -30 "$out/stackcmp.log"
      tar -czf "$out/stack_results.tgz" .asv/results .asv/records -C "$out" stack.log \
        stackcmp.log stackcmp && rm -r "$out/stack.log" "$out/stackcmp.log" "$out/stackcmp" ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "=== done $(date -u +%H:%M:%S)"
