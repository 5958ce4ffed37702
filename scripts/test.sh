#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite. GPU tests skip cleanly where no
# GPU exists. Tests labelled `slow` run too unless RINGMASTER_SKIP_SLOW=1. Then the sanitizer
# build's unit tests and a bounded run of every fuzz target (scripts/sanitize-and-fuzz.sh, in
# build-sanitize/) unless RINGMASTER_SKIP_SANITIZE=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
scripts/build.sh
args=(--test-dir build --output-on-failure -j"${RINGMASTER_TEST_JOBS:-2}" --timeout 1800)
if [[ ${RINGMASTER_SKIP_SLOW:-0} == 1 ]]; then args+=(-LE slow); fi
ctest "${args[@]}"
if [[ ${RINGMASTER_SKIP_SANITIZE:-0} != 1 ]]; then scripts/sanitize-and-fuzz.sh; fi
