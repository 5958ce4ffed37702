#!/usr/bin/env bash
# Issue #8's sanitizer and fuzzing check, run by scripts/test.sh (CI) unless
# RINGMASTER_SKIP_SANITIZE=1. In its own tree, build-sanitize/ (clang, RINGMASTER_SANITIZE=ON,
# RINGMASTER_FUZZ=ON, no nvcc but the CUDA emulator (RINGMASTER_CUDA_EMU=ON), the control plane
# when gRPC is installed):
#   1. builds the unit-test binaries and the fuzz targets (not the trainer/agent binaries the
#      end-to-end tests need: those tests are not run here);
#   2. runs the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (label unit, less
#      integration|slow|serial|gpu; any sanitizer report fails the test);
#   3. fuzzes the targets in fuzz/, RINGMASTER_SANITIZE_JOBS at a time, for
#      RINGMASTER_FUZZ_TOTAL_SECONDS (default 60) of wall time shared equally among them (at least
#      5 s each), each on a fresh copy of its seed corpus fuzz/corpus/<target>/; a crash,
#      sanitizer report, leak, timeout or out-of-memory fails the script and leaves the input in
#      build-sanitize/fuzz-artifacts/. A longer campaign on one target:
#      RINGMASTER_FUZZ_SECONDS=600 RINGMASTER_FUZZ_ONLY=target.
# Knobs: RINGMASTER_FUZZ_TOTAL_SECONDS, RINGMASTER_FUZZ_SECONDS (per target, instead of a share of
# the total), RINGMASTER_SANITIZE_JOBS (build/test parallelism, default nproc),
# RINGMASTER_SANITIZE_BUILD_DIR, RINGMASTER_FUZZ_ONLY=target[,target] (fuzz only these),
# RINGMASTER_SKIP_FUZZ=1 / RINGMASTER_SKIP_SANITIZE_TESTS=1 (skip step 3 / step 2),
# RINGMASTER_SANITIZE_BUILD_ONLY=1 (step 1 only: scripts/test.sh builds the tree this way in the
# background while the main tests run, then calls the script again, whose build is a no-op).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${RINGMASTER_SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}"
JOBS="${RINGMASTER_SANITIZE_JOBS:-$(nproc)}"
FUZZ_TOTAL_SECONDS="${RINGMASTER_FUZZ_TOTAL_SECONDS:-60}"
start=$(date +%s)
step() { echo "sanitize-and-fuzz: [$(($(date +%s) - start))s] $*"; }

for tool in clang++ cmake ninja; do
  command -v "$tool" >/dev/null || { echo "sanitize-and-fuzz: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done

step "configure $BUILD"
# -O1 with line tables: sanitizer builds compile about twice as fast as -O3 and still give
# file:line stacks. Debug keeps assertions on. The tests' own sources at -O0, half the compile
# time of -O1 under the sanitizers (cmake/test_optimization.cmake). No nvcc (clang builds the
# host code), but the CUDA emulator, asked for explicitly (it is off by default): the emulated
# CUDA tests below run under the sanitizers too.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" -DRINGMASTER_TEST_OPT_LEVEL=-O0 \
  -DRINGMASTER_SANITIZE=ON -DRINGMASTER_FUZZ=ON \
  -DRINGMASTER_CUDA=OFF -DRINGMASTER_CUDA_EMU=ON -DRINGMASTER_CONTROL_PLANE=ON \
  >"$BUILD.configure.log" 2>&1 ||
  { cat "$BUILD.configure.log"; exit 1; }
grep -E "^-- ringmaster:" "$BUILD.configure.log" || true

# Unit tests whose binaries are named as the tests (ringmaster_add_unit_tests), and fuzz targets
# (their corpus-replay tests are named <target>_corpus).
test_filter=(-L unit -LE 'integration|slow|serial|gpu')
# The emulated CUDA tests (RINGMASTER_CUDA_EMU, label emulated) once each: kernels_gpu_test under
# one schedule (the plain build runs all three, and its racecheck build); its binary is named
# without the schedule.
# Every emulated test with several schedules likewise runs under its first one only, and the
# racecheck builds not at all: their objects are compiled without ASan (the instrumentation is
# the race detector's), so here they only run slower (wire_codec_gpu_test_racecheck passed in
# 16 s in the plain build and timed out at 300 s here). The variants that change only the
# emulator's settings (lazy streams, refused cuBLASLt candidates, another compute capability) run
# in the plain build only: they check stream order and dispatch, which ASan does not see, and
# under ASan cost ~1.5 minutes (cuda_data_parallel_gpu_test_lazy alone took ~2, CI rehearsal
# 2026-12-02). cuda_data_parallel_gpu_test runs its 2-rank cases here (trainer/cuda/CMakeLists.txt).
emu_filter=(-L emulated -LE slow -E '_(reverse|random|racecheck|lazy|plain_gemm|cc70|cc61)$')
# The targets to build: each selected test's executable, the test's name or, for a test that
# runs a binary under another name (kernels_gpu_test_forward under a schedule, a test under
# another emulated compute capability: <binary>_<variant>), the longest prefix that is a target;
# tests run by a script have none and are left out of the build (ctest still runs them).
test_binaries() {
  ctest --test-dir "$BUILD" -N "$@" | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' |
    python3 -c '
import subprocess, sys
out = subprocess.run(["ninja", "-C", sys.argv[1], "-t", "targets", "all"], check=True,
                     capture_output=True, text=True).stdout
targets = {line.split(":")[0] for line in out.splitlines()}
for name in sys.stdin.read().split():
    t = name
    while t not in targets and "_" in t:
        t = t.rsplit("_", 1)[0]
    if t in targets:
        print(t)  # a test with no binary target (a script, e.g. docs_metric_names) needs no build
' "$BUILD"
}
mapfile -t unit_tests < <({ test_binaries "${test_filter[@]}"; test_binaries "${emu_filter[@]}"; } | sort -u)
mapfile -t fuzzers < <(ctest --test-dir "$BUILD" -N -L fuzz | sed -nE 's/^ *Test +#[0-9]+: (.*)_corpus$/\1/p')
if [[ -n ${RINGMASTER_FUZZ_ONLY:-} ]]; then
  IFS=, read -ra fuzzers <<<"$RINGMASTER_FUZZ_ONLY"
fi
step "build ${#unit_tests[@]} unit tests and ${#fuzzers[@]} fuzz targets (-j$JOBS)"
ninja -C "$BUILD" -j"$JOBS" -k 0 "${unit_tests[@]}" "${fuzzers[@]}"
if [[ ${RINGMASTER_SANITIZE_BUILD_ONLY:-0} == 1 ]]; then
  step "built"
  exit 0
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}"

failed=()
if [[ ${RINGMASTER_SKIP_SANITIZE_TESTS:-0} != 1 ]]; then
  step "unit tests under ASan+UBSan"
  # A failure is reported at the end, after the fuzzers had their turn.
  ctest --test-dir "$BUILD" "${test_filter[@]}" --output-on-failure -j"$JOBS" --timeout 900 ||
    failed+=("unit tests")
  ctest --test-dir "$BUILD" "${emu_filter[@]}" --output-on-failure -j"$JOBS" --timeout 900 ||
    failed+=("emulated gpu tests")
fi

if [[ ${RINGMASTER_SKIP_FUZZ:-0} != 1 ]]; then
  work="$BUILD/fuzz-work"
  artifacts="$BUILD/fuzz-artifacts"
  rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  # A bounded total, so that a new target does not lengthen CI: libFuzzer runs on one core, so
  # $JOBS targets run at once and the total is shared among the rounds this takes.
  n=${#fuzzers[@]}
  parallel=$((JOBS > 0 ? JOBS : 1))
  rounds=$(((n + parallel - 1) / parallel))
  seconds_per_target=$((FUZZ_TOTAL_SECONDS / (rounds > 0 ? rounds : 1)))
  ((seconds_per_target >= 5)) || seconds_per_target=5
  seconds_per_target=${RINGMASTER_FUZZ_SECONDS:-$seconds_per_target}
  fuzz_one() {
    local f=$1 extra=()
    cp -r "$ROOT/fuzz/corpus/$f" "$work/$f"
    # The coordinator logs every event to stderr; libFuzzer still prints its reports.
    [[ $f == coordinator_requests_fuzz ]] && extra+=(-close_fd_mask=2)
    "$BUILD/fuzz/$f" -max_total_time="$seconds_per_target" -timeout=20 -rss_limit_mb=2560 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$f-" "${extra[@]}" "$work/$f" \
      >"$work/$f.log" 2>&1
  }
  # Reports one finished target (its pid in $1, exit status in $2).
  fuzz_done() {
    local f=${target_of[$1]}
    if (($2 != 0)); then
      tail -n 60 "$work/$f.log" || true
      failed+=("$f")
    else
      echo "$f: $(grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)" \
        "$work/$f.log" | tr '\n' ' ')"
    fi
  }
  step "fuzz ${n} targets for ${seconds_per_target}s each, ${parallel} at a time"
  declare -A target_of=()
  running=0
  for f in "${fuzzers[@]}"; do
    if ((running >= parallel)); then
      status=0
      wait -n -p pid || status=$?
      fuzz_done "$pid" "$status"
      running=$((running - 1))
    fi
    fuzz_one "$f" &
    target_of[$!]=$f
    running=$((running + 1))
  done
  while ((running > 0)); do
    status=0
    wait -n -p pid || status=$?
    fuzz_done "$pid" "$status"
    running=$((running - 1))
  done
fi

if ((${#failed[@]})); then
  echo "sanitize-and-fuzz: FAILED: ${failed[*]} (fuzz inputs in $BUILD/fuzz-artifacts/)" >&2
  exit 1
fi
step "ok"
