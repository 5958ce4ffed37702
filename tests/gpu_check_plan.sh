#!/usr/bin/env bash
# ctest-labels: unit
# scripts/gpu-check.sh's pure decisions (scripts/gpu_check_plan_test.py): its time plan fits
# one device command with the benchmark first, a gpu test exiting 77 on a GPU machine fails the
# check, the carried glibc is used only where the image's is older, torch.compile's warm-up
# waits for a stable step time. Standard library only; no process of the project is started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec python3 "$ROOT/scripts/gpu_check_plan_test.py"
