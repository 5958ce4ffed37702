#!/usr/bin/env bash
# Configures and builds everything into build/ (Release). Safe to re-run; incremental.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C build -j"${RINGMASTER_JOBS:-$(nproc)}"
