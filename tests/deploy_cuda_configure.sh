#!/usr/bin/env bash
# ctest-labels: deploy
# The CUDA agent images carry the real trainer (issue #29). There is no Docker engine and no
# NVIDIA base image here, so the images are not built; what is checked is their configure line,
# parsed from docker/agent-cuda13.Dockerfile and agent-cuda12.Dockerfile (tests/lib/
# dockerfile_cmake.py: the RUN cmake instruction with the files' ARG defaults), not copied here:
#   - both pass -DRINGMASTER_CUDA=ON, -DRINGMASTER_CUDA_EMU=OFF and their ARG
#     CUDA_ARCHITECTURES as -DCMAKE_CUDA_ARCHITECTURES (sm_61 and sm_70 in the CUDA 12 file only);
#   - the line is run on this machine into a scratch build directory (configure only: building
#     the CUDA trainer with nvcc takes ~10 minutes on 2 cores; see --build below), with the
#     toolkit of the file's CUDA major version, and the result must be the real thing: in
#     CMakeCache.txt RINGMASTER_CUDA_EMU OFF, nvcc as CMAKE_CUDA_COMPILER, the file's
#     architectures, NCCL_LIBRARY found; in generated/ringmaster_build_info.h (what
#     `ringmaster-trainer --version` prints, common/version.cc) "CUDA <nvcc's version>,
#     architectures <the file's>" and "NCCL: yes (...)", nothing emulated; and the Dockerfile's
#     ninja targets exist in that tree;
#   - a configure with no settings at all gives that real CUDA build as well (not the emulator).
# Which toolkit runs which file: the CUDA 13 file with this machine's nvcc when it is CUDA 13
# (/usr/local/cuda). CUDA 13's nvcc cannot compile sm_61/sm_70, so CMake's compiler check fails
# on the CUDA 12 file's list; it is configured only when a CUDA 12 nvcc is found (CUDA_12_NVCC,
# or nvcc under /usr/local/cuda-12*). Debian packages no CUDA 12: its nvidia-cuda-toolkit is 11.8
# (scripts/compile-check-old-gpus.sh compile-checks the kernels for sm_61/sm_70 with it), which
# is not the image's toolkit, so it is not used here. Without a CUDA 12 nvcc the CUDA 12 file
# gets the flag checks only, and the test says so. A file whose toolkit is missing is a skip only
# when neither file could be configured (exit 77).
#
#   tests/deploy_cuda_configure.sh --build [ARCHS]   also builds ringmaster-trainer from the CUDA
#       13 file's configure with nvcc (ARCHS instead of the file's architectures, e.g. 90-real,
#       to save time; ccache when installed) and checks what its --version prints. Not in CI:
#       ~10 minutes or more on 2 cores (docs/operations.md).
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
build_archs=""
do_build=0
if [[ ${1:-} == --build ]]; then
  do_build=1
  build_archs=${2:-}
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--build [ARCHS]]" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# nvcc_of MAJOR: an nvcc of that CUDA major version, or nothing.
nvcc_of() {
  local major=$1 c
  local candidates=(/usr/local/cuda/bin/nvcc "$(command -v nvcc || true)")
  [[ $major == 12 ]] && candidates=("${CUDA_12_NVCC:-}" /usr/local/cuda-12*/bin/nvcc)
  for c in "${candidates[@]}"; do
    [[ -n $c && -x $c ]] || continue
    if "$c" --version 2>/dev/null | grep -q "release $major\."; then
      echo "$c"
      return
    fi
  done
}

# cache_value TREE NAME: NAME's value in TREE/CMakeCache.txt.
cache_value() { sed -nE "s/^$2:[A-Z]+=(.*)$/\1/p" "$1/CMakeCache.txt"; }
# info TREE NAME: a #define of the generated build-info header, unquoted.
info() { sed -nE "s/^#define $2 \"(.*)\"$/\1/p" "$1/generated/ringmaster_build_info.h"; }

configured=0
cuda13_version=""
for file in agent-cuda13 agent-cuda12; do
  dockerfile=$ROOT/docker/$file.Dockerfile
  tree=$work/$file
  mapfile -t lines < <(python3 "$ROOT/tests/lib/dockerfile_cmake.py" "$dockerfile" "$ROOT" "$tree")
  ((${#lines[@]})) || fail "$file: no configure line parsed"
  cmd=() version="" archs=""
  for l in "${lines[@]}"; do
    case $l in
      "# ARG CUDA_VERSION="*) version=${l#*=} ;;
      "# ARG CUDA_ARCHITECTURES="*) archs=${l#*=} ;;
      "# ARG "*) ;;
      *) cmd+=("$l") ;;
    esac
  done
  major=${version%%.*}
  [[ -n $major && -n $archs ]] || fail "$file: no ARG CUDA_VERSION / CUDA_ARCHITECTURES default"
  echo "== $file: CUDA $version, architectures $archs"
  echo "   configure: ${cmd[*]}"
  # The flags themselves.
  for flag in -DRINGMASTER_CUDA=ON -DRINGMASTER_CUDA_EMU=OFF -DRINGMASTER_NATIVE=OFF \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs"; do
    printf '%s\n' "${cmd[@]}" | grep -qxF -- "$flag" || fail "$file: the configure line lacks $flag"
  done
  old_archs=$(tr ';' '\n' <<<"$archs" | grep -cE '^(61|70)-' || true)
  if [[ $file == agent-cuda12 ]]; then
    ((old_archs == 2)) || fail "$file: sm_61 and sm_70 are not both in $archs"
  else
    ((old_archs == 0)) || fail "$file: $archs lists sm_61/sm_70, which CUDA $major cannot build"
  fi

  nvcc=$(nvcc_of "$major")
  if [[ -z $nvcc ]]; then
    echo "   NOT CONFIGURED: no CUDA $major nvcc here (CUDA_12_NVCC, /usr/local/cuda-$major*);" \
      "checked: the flags above only"
    continue
  fi
  # As in the image's build stage: nvcc found by the project's CMakeLists (PATH or
  # /usr/local/cuda), no compiler or NCCL chosen from this shell's environment.
  start=$SECONDS
  env -u CUDACXX -u NCCL_ROOT -u CMAKE_CXX_COMPILER_LAUNCHER -u CMAKE_CUDA_COMPILER_LAUNCHER \
    PATH="$(dirname "$nvcc"):$PATH" "${cmd[@]}" >"$work/$file.log" 2>&1 ||
    { tail -30 "$work/$file.log"; fail "$file: the configure line failed with $nvcc"; }
  configured=$((configured + 1))
  grep -E '^-- ringmaster:' "$work/$file.log" | sed 's/^/   /'
  [[ $(cache_value "$tree" RINGMASTER_CUDA_EMU) == OFF ]] || fail "$file: RINGMASTER_CUDA_EMU is not OFF"
  # The CUDA compiler CMake enabled (the project sets it as a normal variable, so it is not
  # always in the cache) and its version.
  compiler_file=$(ls "$tree"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -1)
  [[ -n $compiler_file ]] || fail "$file: CUDA was not enabled (no CMakeCUDACompiler.cmake)"
  compiler=$(sed -nE 's/^set\(CMAKE_CUDA_COMPILER "(.*)"\)$/\1/p' "$compiler_file")
  [[ $(basename "$compiler") == nvcc ]] || fail "$file: the CUDA compiler is '$compiler', not nvcc"
  [[ $(cache_value "$tree" CMAKE_CUDA_ARCHITECTURES) == "$archs" ]] ||
    fail "$file: CMAKE_CUDA_ARCHITECTURES is '$(cache_value "$tree" CMAKE_CUDA_ARCHITECTURES)', not $archs"
  nccl=$(cache_value "$tree" NCCL_LIBRARY)
  [[ -n $nccl && $nccl != *NOTFOUND* && -e $nccl ]] || fail "$file: no NCCL library found ('$nccl')"
  nvcc_version=$(sed -nE 's/^set\(CMAKE_CUDA_COMPILER_VERSION "(.*)"\)$/\1/p' "$compiler_file")
  [[ ${nvcc_version%%.*} == "$major" ]] || fail "$file: nvcc $nvcc_version is not CUDA $major"
  [[ $file == agent-cuda13 ]] && cuda13_version=$nvcc_version
  want_cuda="CUDA $nvcc_version, architectures $archs"
  [[ $(info "$tree" RINGMASTER_BUILD_CUDA) == "$want_cuda" ]] ||
    fail "$file: --version would say CUDA engine: '$(info "$tree" RINGMASTER_BUILD_CUDA)', not '$want_cuda'"
  [[ $(info "$tree" RINGMASTER_BUILD_NCCL) == "yes ($nccl)" ]] ||
    fail "$file: --version would say NCCL: '$(info "$tree" RINGMASTER_BUILD_NCCL)', not 'yes ($nccl)'"
  grep -qi emulat "$tree/generated/ringmaster_build_info.h" && fail "$file: the build info names the emulator"
  # The image's ninja targets (the RUN line's `ninja -C /build ...`) exist in this tree.
  targets=$(sed -nE 's/^ *&& ninja -C \/build (.*)\\?$/\1/p' "$dockerfile" | tr -d '\\')
  [[ -n $targets ]] || fail "$file: no ninja line"
  ninja -C "$tree" -t targets all >"$work/targets.txt"
  for t in $targets; do grep -q "^$t:" "$work/targets.txt" || fail "$file: no ninja target $t"; done
  echo "   configured in $((SECONDS - start)) s with $nvcc: CUDA engine: $want_cuda; NCCL: yes ($nccl); targets $targets"
done
((configured > 0)) || { echo "SKIP: no CUDA 12 or 13 nvcc here: only the flags were checked"; exit 77; }

# A configure with no settings at all, on a machine with nvcc and (here) no GPU, is the real CUDA
# build too: the emulator is only where asked (RINGMASTER_CUDA_EMU defaults to OFF).
tree=$work/default
start=$SECONDS
env -u CUDACXX -u NCCL_ROOT -u CMAKE_CXX_COMPILER_LAUNCHER -u CMAKE_CUDA_COMPILER_LAUNCHER \
  cmake -S "$ROOT" -B "$tree" -G Ninja >"$work/default.log" 2>&1 ||
  { tail -30 "$work/default.log"; fail "a default configure failed"; }
[[ $(cache_value "$tree" RINGMASTER_CUDA_EMU) == OFF ]] ||
  fail "a default configure chose RINGMASTER_CUDA_EMU=$(cache_value "$tree" RINGMASTER_CUDA_EMU)"
default_cuda=$(info "$tree" RINGMASTER_BUILD_CUDA)
[[ $default_cuda == "CUDA "* ]] || fail "a default configure builds CUDA engine: '$default_cuda', not nvcc's"
echo "== default configure (no settings): CUDA engine: $default_cuda ($((SECONDS - start)) s)"

if ((do_build)); then
  tree=$work/agent-cuda13
  [[ -f $tree/CMakeCache.txt ]] || fail "--build needs the CUDA 13 file configured (no CUDA 13 nvcc)"
  extra=()
  [[ -n $build_archs ]] && extra+=("-DCMAKE_CUDA_ARCHITECTURES=$build_archs")
  if command -v ccache >/dev/null; then
    extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  ((${#extra[@]})) && cmake "$tree" "${extra[@]}" >/dev/null
  start=$SECONDS
  ninja -C "$tree" -j"${RINGMASTER_JOBS:-$(nproc)}" ringmaster-trainer >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; fail "building ringmaster-trainer with nvcc"; }
  echo "== built ringmaster-trainer with nvcc in $((SECONDS - start)) s (architectures" \
    "$(cache_value "$tree" CMAKE_CUDA_ARCHITECTURES))"
  version_text=$("$tree/trainer/ringmaster-trainer" --version)
  echo "$version_text" | sed 's/^/   /'
  grep -qF "CUDA engine: CUDA $cuda13_version," <<<"$version_text" || fail "--version names no nvcc build"
  grep -qF "NCCL: yes (" <<<"$version_text" || fail "--version names no NCCL"
  grep -qi emulat <<<"$version_text" && fail "--version names the emulator"
  ldd "$tree/trainer/ringmaster-trainer" | grep -q 'not found' && fail "a library of the trainer is missing"
fi
echo "deploy_cuda_configure: passed ($configured of 2 Dockerfiles configured)"
