#!/usr/bin/env bash
# Another process on the gate's GPU (issue 45, item 6), on one GPU machine, in one device call:
#   OUT=dir bash tools/lab/experiments/gpu_neighbour.sh [with] [without]     (default: both)
# with:    a neighbour process (tools/lab/experiments/gpu_neighbour.py neighbour: random 2-4 s
#          bursts of bf16 8192^3 matmuls, 1-3 s apart, its CUDA context held throughout) on
#          GPU 0; NVML's process lists timed meanwhile (neighbour-cost.json); then a gate A/A
#          (gpu_validate.sh gate:aa) over GATE_REGEX; the neighbour stopped after it.
# without: the same A/A again, alone (gpu_validate.sh gate:again).
# Then the done-when: with the neighbour, gate.md names it (pid, name) and no case is SLOW or
# FAST; without it, no "another process" line (neighbour-check.json; PASS or FAIL printed).
# Files in $OUT: gate-0-aa.tgz, gate-1-again.tgz (each gate's folder, gpu_validate.sh),
# neighbour-cost.json, neighbour-check.json, neighbour-bursts.jsonl.
# Each gate is bounded by a copy of thresholds.json with gate_wall_s GATE_WALL_S (default 220)
# and by STEP_TIMEOUT (default 230 s); the whole call ~6-8 min on an H100 (estimated, not run).
set -u
out=${OUT:?set OUT}
phases=("$@"); [ ${#phases[@]} -eq 0 ] && phases=(with without)
here=tools/lab/experiments
regex=${GATE_REGEX:-"(GemmTime\.track_time\('square-8192', 'fp16'|RmsnormTime\.track_time\('llama3-8b\.hidden', 'bf16'|SoftmaxTime\.track_time\('llama3-8b\.logits-4k', 'bf16'), 'triton'"}
# kept between calls on a warm machine: "with" in one call and "without" in the next still checks
work=${NEIGHBOUR_WORK:-/tmp/kperf-neighbour}
for phase in "${phases[@]}"; do rm -rf "${work:?}/$phase"; mkdir -p "$work/$phase"; done
python3 - "$work/thresholds.json" "${GATE_WALL_S:-220}" <<'TH'
import json, sys
th = json.load(open("thresholds.json"))
th["budget"]["gate_wall_s"] = float(sys.argv[2])
json.dump(th, open(sys.argv[1], "w"), indent=1)
TH
export GATE_THRESHOLDS="$work/thresholds.json" STEP_TIMEOUT=${STEP_TIMEOUT:-230}
keep_report() { cp .asv/pr-gate/gate.json .asv/pr-gate/gate.md .asv/pr-gate/rounds.md "$1/" 2>/dev/null; }
for phase in "${phases[@]}"; do
  echo "=== neighbour: $phase $(date -u +%H:%M:%S)"
  case $phase in
    with)
      python3 "$here/gpu_neighbour.py" neighbour "$work/with" > "$work/neighbour.log" 2>&1 &
      npid=$!
      for _ in $(seq 90); do [ -f "$work/with/ready" ] && break; sleep 1; done
      [ -f "$work/with/ready" ] || { echo "the neighbour did not start:"; tail -5 "$work/neighbour.log"; }
      nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
      timeout 120 python3 "$here/gpu_neighbour.py" cost "$out/neighbour-cost.json"
      OUT=$out bash tools/gpu_validate.sh "gate:aa:$regex"
      keep_report "$work/with"
      kill "$npid"; wait "$npid" 2>/dev/null
      cp "$work/with/bursts.jsonl" "$out/neighbour-bursts.jsonl" 2>/dev/null ;;
    without)
      nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
      OUT=$out bash tools/gpu_validate.sh "gate:again:$regex"
      keep_report "$work/without" ;;
    *) echo "unknown phase $phase (with, without)" ;;
  esac
done
python3 "$here/gpu_neighbour.py" check "$work/with" "$work/without" "$out/neighbour-check.json" \
  | tail -30
grep -h "another process" "$work/with/rounds.md" 2>/dev/null | head -5
