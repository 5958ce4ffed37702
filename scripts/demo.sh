#!/usr/bin/env bash
# Sets up, builds and runs the embedded demo job through the whole control plane:
# `ringmaster local` starts a coordinator and two agents on this machine, and the agents' two
# CPU ranks train a small BERT from scratch on the generated sentiment data (data-parallel over
# Gloo), ending with dev accuracy and an exported HF model directory (runs/demo/final).
# Re-running resumes from the latest checkpoint in runs/demo. Extra arguments go to
# `ringmaster local` (a JOB.yaml, --nodes N, --procs-per-node M, --keep).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
# A first build on a machine where nvidia-smi lists no GPU leaves CUDA out: the demo trains on
# the CPU, and compiling the CUDA trainer with nvcc would add ~10 minutes on 2 cores for nothing.
# An existing build/ is built as it is configured (after scripts/test.sh: its emulator build,
# already built, so nothing to do).
if [[ ! -f build/build.ninja ]] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then
  scripts/build.sh -DRINGMASTER_CUDA=OFF
else
  scripts/build.sh
fi
if [[ -x build/cli/ringmaster ]]; then
  exec build/cli/ringmaster local --nodes 2 --procs-per-node 1 "$@"
fi
# Without gRPC (a machine that only builds the trainer): the same job in one process.
exec build/trainer/ringmaster-trainer train "$@"
