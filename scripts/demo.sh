#!/usr/bin/env bash
# Sets up, builds and runs the embedded demo job: a small BERT trained from scratch on CPU on
# the generated sentiment data, ending with dev accuracy and an exported HF model directory
# (runs/demo/final). Re-running resumes from the latest checkpoint in runs/demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
scripts/build.sh
exec build/trainer/ringmaster-trainer train "$@"
