#!/usr/bin/env bash
# The embedded demo job (2,000 steps of a 2-layer BERT on the generated sentiment data) trained on
# the CPU engine and on the CUDA engine, from the same seed: both must reach the same dev accuracy
# within one point. Without a GPU the CUDA engine runs under the CUDA emulator (a build with
# -DRINGMASTER_CUDA_EMU=ON, as scripts/test.sh makes; the script opts its trainer in with
# RINGMASTER_EMULATED_CUDA_OK=1): ~45 samples/s on 2 cores, so the CUDA run takes ~25 minutes;
# too long for CI, hence a script. Prints both accuracies, their difference and each run's time.
#   scripts/bench-cuda-demo.sh        (build first: scripts/build.sh -DRINGMASTER_CUDA_EMU=ON)
set -euo pipefail
export RINGMASTER_EMULATED_CUDA_OK=1  # no effect on a real CUDA build
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
T=${TRAINER:-$ROOT/build/trainer/ringmaster-trainer}
[[ -x $T ]] || { echo "no trainer at $T: build first (scripts/build.sh)"; exit 1; }
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
acc() { grep -o '"eval_accuracy":[^,}]*' "$1/runs/demo/metrics.jsonl" | tail -1 | cut -d: -f2; }
for dev in cpu cuda; do
  mkdir -p "$top/$dev"
  start=$(date +%s)
  # The demo job runs in the current directory (runs/demo); the data is generated there.
  (cd "$top/$dev" && "$T" train --device "$dev" >"$top/$dev.log" 2>&1) ||
    { tail -20 "$top/$dev.log"; echo "FAIL: the $dev run"; exit 1; }
  grep -q "the CUDA engine" "$top/$dev.log" && [[ $dev == cpu ]] && { echo "FAIL: cpu run on CUDA"; exit 1; }
  echo "$dev engine: dev accuracy $(acc "$top/$dev") after $(($(date +%s) - start)) s"
done
awk -v a="$(acc "$top/cpu")" -v b="$(acc "$top/cuda")" 'BEGIN {
  d = a - b; if (d < 0) d = -d
  printf "difference %.2f points (limit 1)\n", 100 * d
  exit !(d <= 0.01) }'
