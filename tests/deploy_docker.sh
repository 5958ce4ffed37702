#!/usr/bin/env bash
# ctest-labels: deploy
# docker/: there is no Docker engine on the build machines, so the images are not built here
# (docs/operations.md says what that leaves unverified). What is checked: every Dockerfile is
# multi-stage, installs its build dependencies through scripts/setup.sh, builds portable code
# (RINGMASTER_NATIVE=OFF), runs as a non-root user, and copies only paths that exist; the two
# agent Dockerfiles differ only in their CUDA version, architectures and the build line in the
# header, with sm_61/sm_70 in the CUDA 12 one and nothing below sm_75 in the CUDA 13 one; and
# docker/runtime-packages.sh, which picks the runtime stage's packages, maps the binaries
# built in build/ to installed packages (and fails on a binary with a missing library).
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${RINGMASTER_BINARY_DIR:-$ROOT/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT"
fail() { echo "FAIL: $*"; exit 1; }
for f in docker/coordinator.Dockerfile docker/agent-cuda12.Dockerfile docker/agent-cuda13.Dockerfile; do
  [[ -f $f ]] || fail "$f missing"
  [[ -f $f.dockerignore ]] || fail "$f.dockerignore missing"
  (($(grep -c '^FROM ' "$f") >= 2)) || fail "$f is not multi-stage"
  grep -q 'RUN .*scripts/setup.sh' "$f" || fail "$f does not use scripts/setup.sh"
  grep -q -- '-DRINGMASTER_NATIVE=OFF' "$f" || fail "$f builds with -march=native"
  last_user=$(awk '/^FROM /{u=""} /^USER /{u=$2} END{print u}' "$f")
  [[ -n $last_user && ${last_user%%:*} != root && ${last_user%%:*} != 0 ]] || fail "$f: final stage runs as root"
  # COPY sources from the build context must exist (stage copies use --from).
  while read -r src; do
    [[ -e $src ]] || fail "$f copies $src, which does not exist"
  done < <(awk '/^COPY / && !/--from=/ {for (i = 2; i < NF; i++) print $i}' "$f")
done
grep -q '^ARG CUDA_VERSION=12\.' docker/agent-cuda12.Dockerfile || fail "agent-cuda12 is not CUDA 12"
grep -q '^ARG CUDA_VERSION=13\.' docker/agent-cuda13.Dockerfile || fail "agent-cuda13 is not CUDA 13"
grep '^ARG CUDA_ARCHITECTURES=' docker/agent-cuda12.Dockerfile | grep -q '61-real;70-real' || fail "cuda12 lacks sm_61/sm_70"
grep '^ARG CUDA_ARCHITECTURES=' docker/agent-cuda13.Dockerfile | grep -qE '"(5|6)[0-9]-|;(5|6|70|72)-' && fail "cuda13 lists an architecture CUDA 13 cannot build"
diff <(grep -v '^ARG CUDA_VERSION=\|^ARG CUDA_ARCHITECTURES=\|^#   docker build' docker/agent-cuda12.Dockerfile) \
     <(grep -v '^ARG CUDA_VERSION=\|^ARG CUDA_ARCHITECTURES=\|^#   docker build' docker/agent-cuda13.Dockerfile) \
  || fail "the agent Dockerfiles drifted apart"
# Build targets named in the Dockerfiles are real CMake targets.
for t in ringmaster-coordinator ringmaster-agent ringmaster-trainer; do
  grep -rq "add_executable($t" --include=CMakeLists.txt . || fail "no CMake target $t"
done
grep -rq 'OUTPUT_NAME ringmaster\b\|add_executable(ringmaster ' --include=CMakeLists.txt cli || fail "no CMake target ringmaster (CLI)"

# runtime-packages.sh on the real binaries.
docker/runtime-packages.sh "$BIN/coordinator/ringmaster-coordinator" "$BIN/cli/ringmaster" \
  "$BIN/agent/ringmaster-agent" "$BIN/trainer/ringmaster-trainer" >"$work/pkgs.txt" 2>"$work/err.txt" \
  || { cat "$work/err.txt"; fail "runtime-packages.sh"; }
for p in libgrpc++1.51 libsqlite3-0 libstdc++6 libc6; do grep -qx "$p" "$work/pkgs.txt" || fail "runtime-packages.sh missed $p"; done
while read -r p; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || fail "listed $p is not an installed package"
done <"$work/pkgs.txt"
echo "runtime packages: $(wc -l <"$work/pkgs.txt") ($(tr '\n' ' ' <"$work/pkgs.txt"))"
# ... and it refuses a binary whose library is missing.
cp "$BIN/coordinator/ringmaster-coordinator" "$work/c"
mkdir "$work/lib"
libgrpc=$(ldd "$work/c" | awk '/libgrpc\+\+/ && !p {print $3; p = 1}')
cp "$libgrpc" "$work/lib/"
LD_LIBRARY_PATH=$work/lib docker/runtime-packages.sh "$work/c" >/dev/null 2>"$work/err2.txt" \
  && fail "a library no package owns was accepted"
grep -q "no package owns $work/lib/" "$work/err2.txt" || { cat "$work/err2.txt"; fail "unexpected error"; }
# The launch wrapper the agent images install is executable and POSIX sh.
[[ -x scripts/trainer-launch.sh ]] || fail "scripts/trainer-launch.sh is not executable"
sh -n scripts/trainer-launch.sh
echo "deploy_docker: 1 passed, 0 failed"
