#!/usr/bin/env bash
# One command for a lent GPU (issue #18): the CUDA trainer's tests on the real device, the same
# under compute-sanitizer, the CUDA engine against the CPU engine through the binary, the cuBLASLt
# GELU-epilogue probe, a benchmark against PyTorch and a timed SST-2-size fine-tune.
#
#   scripts/gpu-check.sh --prepare   here (no GPU needed): builds the gpu test binaries,
#                                    ringmaster-trainer and the probe with nvcc in build-cuda
#                                    (RINGMASTER_CUDA_EMU=OFF), bundles them with every non-CUDA
#                                    shared library they need and the generated data into
#                                    gpu-bundle/bundle.tgz (ignored; fails past the 64 MiB the
#                                    device machine accepts, counted with the tracked files)
#   scripts/gpu-check.sh --run       on the GPU machine, from the repo root, with gpu-bundle
#                                    carried: writes gpu-check.log, gpu-check.json and
#                                    details.tgz to $OUT (or --out DIR); the benchmark first,
#                                    then the other stages, time-boxed within --budget seconds
#                                    (default 470; the plan in scripts/gpu_check_plan.py)
#   scripts/gpu-check.sh --emulate   here: the same, end to end, against the emulator build
#                                    (build/, RINGMASTER_CUDA_EMU=ON) with tiny shapes; a
#                                    rehearsal that finds mistakes before the first GPU minute
#                                    (budget 1200 s unless --budget).
#                                    Its figures are NOT performance figures.
#
# PyTorch side: python3, or GPU_CHECK_PYTHON (for --emulate, the repo's .venv when it exists).
# Options: --build-dir DIR, --bundle DIR, --out DIR, --budget SECONDS, --stages a,b,...
# (bench, tests, engine, gelu, kernels, sanitizers, finetune), --jobs N (build parallelism, 2), --tiny
# (with --run: the rehearsal's tiny shapes, a smoke test whose figures are not BERT-base's).
# The run needs only the bundle, the CUDA toolkit/driver, python3 (PyTorch and transformers for
# the PyTorch side, skipped when missing): no gRPC, Abseil, yaml-cpp, OpenBLAS or GTest there.
# docs/performance-gpu.md says how to read the output; scripts/gpu_check_report.py turns
# gpu-check.json into that page's table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

mode=""
build_dir=""
bundle=""
out="${OUT:-}"
budget=""
stages=""
jobs=2
tiny=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --prepare | --run | --emulate) mode=${1#--} ;;
    --build-dir) build_dir=$2; shift ;;
    --bundle) bundle=$2; shift ;;
    --out) out=$2; shift ;;
    --budget) budget=$2; shift ;;
    --stages) stages=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --tiny) tiny=1 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $mode ]] || { echo "gpu-check: give --prepare, --run or --emulate" >&2; exit 2; }

# The device machine takes at most 64 MiB: the tracked files plus the carried bundle.
readonly kLimitBytes=$((64 * 1024 * 1024))
readonly kMarginBytes=$((2 * 1024 * 1024))

# prepare BUILD_DIR BUNDLE_DIR EMULATED(0|1)
prepare() {
  local build=$1 dest=$2 emulated=$3
  # ccache when it is installed (scripts/setup.sh does not install it; a fresh machine has none).
  if [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]] && command -v ccache >/dev/null; then
    export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  fi
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$ROOT")}
  if [[ ! -f $build/CMakeCache.txt ]]; then
    local emu=OFF
    [[ $emulated == 1 ]] && emu=ON
    # CUDAARCHS (CMake's own variable, e.g. 90-real for the H200 alone) narrows the nvcc build.
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRINGMASTER_CUDA_EMU=$emu \
      ${CUDAARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDAARCHS}
  fi
  local want_emu=OFF
  [[ $emulated == 1 ]] && want_emu=ON
  grep -q "^RINGMASTER_CUDA_EMU:BOOL=$want_emu" "$build/CMakeCache.txt" || {
    echo "gpu-check: $build is not configured with RINGMASTER_CUDA_EMU=$want_emu" >&2
    exit 2
  }
  # The gpu tests that run a binary of the build (the script test trainer_cuda_engine is the
  # engine stage), as CTest knows them: name, binary, arguments, environment.
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  local targets
  targets=$(python3 "$ROOT/scripts/gpu_check_bundle.py" targets --build "$build")
  echo "gpu-check: building $targets ringmaster-trainer gelu_epilogue_probe in $build"
  ninja -C "$build" -j"$jobs" $targets ringmaster-trainer gelu_epilogue_probe
  python3 "$ROOT/scripts/gpu_check_bundle.py" stage --build "$build" --stage "$staging/bundle" --emulated "$emulated"
  # Data made here: the SST-2-size set (67,349 train / 872 dev rows; a small one for the
  # rehearsal) and the benchmark's rows, each longer than 128 tokens (the batcher pads to the
  # longest row, so short rows would benchmark a shorter sequence than asked for).
  local t="$staging/bundle/bin/ringmaster-trainer"
  local rows=67349 dev=872
  [[ $emulated == 1 ]] && rows=2000 dev=200
  LD_LIBRARY_PATH="$staging/bundle/lib" "$t" gen-data --out "$staging/bundle/data/sst2" \
    --train $rows --dev $dev --seed 1 >/dev/null
  python3 "$ROOT/scripts/gpu_check_bundle.py" long-rows --input "$staging/bundle/data/sst2/train.tsv" \
    --output "$staging/bundle/data/bench.tsv" --rows 2048 --min-words 160
  mkdir -p "$dest"
  rm -rf "$dest/bundle.tgz" "$dest/out"
  tar -C "$staging/bundle" -czf "$dest/bundle.tgz" .
  local bundle_bytes tracked_bytes total
  bundle_bytes=$(du -sb "$dest" | cut -f1)
  tracked_bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  total=$((bundle_bytes + tracked_bytes))
  awk -v d="$dest" -v b="$bundle_bytes" -v u="$(du -sb "$staging/bundle" | cut -f1)" -v t="$total" \
    'BEGIN { printf "gpu-check: bundle %s: %.1f MiB (unpacked %.1f MiB); with the tracked files %.1f MiB of 64 MiB\n", d, b / 1048576, u / 1048576, t / 1048576 }'
  if ((total > kLimitBytes - kMarginBytes)); then
    echo "gpu-check: FAIL: $dest and the tracked files exceed the device machine's 64 MiB" \
      "(less a 2 MiB margin for untracked files)" >&2
    exit 1
  fi
}

# exec_dir CANDIDATE...: a new folder under the first candidate where a program can execute (a
# noexec /tmp makes every binary exit 126); its path on stdout.
exec_dir() {
  local c d
  for c in "$@"; do
    [[ -d $c && -w $c ]] || continue
    d=$(mktemp -d "$c/gpu-check-bundle.XXXXXX" 2>/dev/null) || continue
    printf '#!/bin/sh\nexit 0\n' >"$d/exec-probe" && chmod +x "$d/exec-probe"
    if "$d/exec-probe" 2>/dev/null; then
      rm -f "$d/exec-probe"
      echo "$d"
      return 0
    fi
    echo "gpu-check: $c does not let programs execute (noexec?); trying the next folder" >&2
    rm -rf "$d"
  done
  return 1
}

# run BUNDLE_DIR OUT EMULATED(0|1)
run() {
  local dest=$1 outdir=$2 emulated=$3
  [[ -f $dest/bundle.tgz ]] || {
    echo "gpu-check: no $dest/bundle.tgz: run --prepare here and carry $dest" >&2
    exit 2
  }
  [[ -n $outdir ]] || { echo "gpu-check: no output folder: set OUT or give --out" >&2; exit 2; }
  mkdir -p "$outdir"
  local unpacked
  unpacked=$(exec_dir "${TMPDIR:-/tmp}" "$ROOT/$dest" "$dest" "${HOME:-/nonexistent}") || {
    echo "gpu-check: FAIL: no folder here lets a program execute (\$TMPDIR, the work tree," \
      "\$HOME all refuse: noexec?)" >&2
    exit 1
  }
  echo "gpu-check: unpacking the bundle into $unpacked"
  tar -C "$unpacked" -xzf "$dest/bundle.tgz"
  local args=(--bundle "$unpacked" --out "$outdir" --budget "$budget" --repo "$ROOT")
  [[ -n $stages ]] && args+=(--stages "$stages")
  [[ $emulated == 1 ]] && args+=(--emulate)
  [[ $tiny == 1 ]] && args+=(--tiny)
  local rc=0
  PYTHONUNBUFFERED=1 python3 "$ROOT/scripts/gpu_check_run.py" "${args[@]}" || rc=$?
  rm -rf "$unpacked"
  return $rc
}

# 470 s on the GPU (one 600 s device command); the emulator rehearsal, with no command limit
# and every stage several times slower on the CPU (38 gpu tests), gets 1200 s.
if [[ -z $budget ]]; then
  budget=470
  [[ $mode == emulate ]] && budget=1200
fi

case $mode in
  prepare) prepare "${build_dir:-build-cuda}" "${bundle:-gpu-bundle}" 0 ;;
  run) run "${bundle:-gpu-bundle}" "$out" 0 ;;
  emulate)
    prepare "${build_dir:-build}" "${bundle:-gpu-bundle-emu}" 1
    out=${out:-$ROOT/gpu-bundle-emu/out}
    if [[ -z ${GPU_CHECK_PYTHON:-} && -x $ROOT/.venv/bin/python ]]; then
      export GPU_CHECK_PYTHON=$ROOT/.venv/bin/python
    fi
    export RINGMASTER_EMULATED_CUDA_OK=1  # the emulated trainer runs CUDA jobs only when asked
    rc=0
    run "${bundle:-gpu-bundle-emu}" "$out" 1 || rc=$?
    # The writer must read what the run wrote; an emulated run is refused as a performance figure.
    python3 "$ROOT/scripts/gpu_check_report.py" --json "$out/gpu-check.json" --print >/dev/null
    exit $rc
    ;;
esac
