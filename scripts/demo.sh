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
scripts/build.sh
if [[ -x build/cli/ringmaster ]]; then
  exec build/cli/ringmaster local --nodes 2 --procs-per-node 1 "$@"
fi
# Without gRPC (a machine that only builds the trainer): the same job in one process.
exec build/trainer/ringmaster-trainer train "$@"
