#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite. GPU tests skip cleanly where no
# GPU exists. Tests labelled `slow` run too unless RINGMASTER_SKIP_SLOW=1. Then the sanitizer
# build's unit tests and a bounded run of every fuzz target (scripts/sanitize-and-fuzz.sh, in
# build-sanitize/) unless RINGMASTER_SKIP_SANITIZE=1.
#
# Time budget of CI (.ci/run) from a fresh clone on the 2-core CI machine: 90 minutes at most,
# aim under 40. Measured 2026-12-02 (fresh clone, quiet machine, 2626 s = 43.8 min in all):
#   setup (apt packages, .venv) + Release build into build/      ~13 min
#   ctest -j2: 191 tests, 1329 s (992 s of it the serial/slow ones, each alone; the largest,
#     tests/dist_compression_accuracy.sh, 392 s) while the sanitizer tree builds in the
#     background (below)                                           ~22 min
#   the rest of the sanitizer build after the tests                ~2.5 min
#   unit tests under ASan+UBSan 54 s, emulated CUDA tests 206 s    ~4.5 min
#   fuzzing                                                        1.5 min
# Changed after that run: cuda_data_parallel_gpu_test_lazy no longer runs under ASan (~2 min of
# it at -j2) and fuzzing takes 60 s (was 90). Before the background build (stop 24's CI): 2866 s,
# the two builds 27 of its 48 minutes. Per-test times: build/Testing/Temporary/CTestCostData.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh
scripts/build.sh
sanitize=$([[ ${RINGMASTER_SKIP_SANITIZE:-0} != 1 ]] && echo 1 || echo 0)
# The sanitizer tree is built in the background while the tests run, on the CPU time they leave
# idle (end-to-end tests spend much of theirs waiting for processes, timeouts and scrapes). Its
# compilers run under SCHED_IDLE: they get a core only when no test process wants it, so the
# tests' timing is as without it. Its log: build-sanitize.build.log.
san_pid=
if ((sanitize)) && [[ ${RINGMASTER_SANITIZE_BACKGROUND:-1} == 1 ]]; then
  idle=(nice -n 19)
  if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0 nice -n 19); fi
  # Its own session, so that a failing test run (set -e) takes the whole build down with it.
  RINGMASTER_SANITIZE_BUILD_ONLY=1 setsid "${idle[@]}" scripts/sanitize-and-fuzz.sh \
    >"$ROOT/build-sanitize.build.log" 2>&1 &
  san_pid=$!
  trap '[[ -n $san_pid ]] && kill -- "-$san_pid" 2>/dev/null; true' EXIT
fi
args=(--test-dir build --output-on-failure -j"${RINGMASTER_TEST_JOBS:-2}" --timeout 1800)
if [[ ${RINGMASTER_SKIP_SLOW:-0} == 1 ]]; then args+=(-LE slow); fi
ctest "${args[@]}"
if ((sanitize)); then
  if [[ -n $san_pid ]]; then
    # A failed background build is reported by the foreground run below, which builds again.
    wait "$san_pid" || echo "test.sh: the background sanitizer build failed; building again" >&2
    san_pid=
    grep -E "^sanitize-and-fuzz: \[" "$ROOT/build-sanitize.build.log" || true
  fi
  scripts/sanitize-and-fuzz.sh
fi
