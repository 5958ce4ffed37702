#!/usr/bin/env bash
# Configures and builds everything into build/ (Release). Safe to re-run; incremental.
#   scripts/build.sh [-DNAME=VALUE ...]
# The -D settings are applied to build/ when it is not configured yet or its cache holds another
# value (scripts/test.sh passes -DRINGMASTER_CUDA_EMU=ON: the tests' emulator build); without
# them an existing build/ is built as it is configured.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
configure=0
[[ -f build/build.ninja ]] || configure=1
for arg in "$@"; do
  [[ $arg =~ ^-D([A-Za-z0-9_]+)(:[A-Z]+)?=(.*)$ ]] || {
    echo "build.sh: expected -DNAME=VALUE, got '$arg'" >&2
    exit 2
  }
  name=${BASH_REMATCH[1]} value=${BASH_REMATCH[3]}
  grep -qxF -e "$name:BOOL=$value" -e "$name:STRING=$value" -e "$name:PATH=$value" \
    -e "$name:FILEPATH=$value" -e "$name:UNINITIALIZED=$value" build/CMakeCache.txt 2>/dev/null ||
    configure=1
done
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
elif ((configure)); then
  cmake -S . -B build "$@" >/dev/null
fi
ninja -C build -j"${RINGMASTER_JOBS:-$(nproc)}"
