#!/usr/bin/env bash
# Sets up (idempotent), builds and runs the whole test suite. GPU tests skip cleanly where no
# GPU exists. Tests labelled `slow` run too unless RINGMASTER_SKIP_SLOW=1. Then the sanitizer
# build's unit tests and a bounded run of every fuzz target (scripts/sanitize-and-fuzz.sh, in
# build-sanitize/) unless RINGMASTER_SKIP_SANITIZE=1.
#
# Time budget of CI (.ci/run) from a fresh clone on the 2-core CI machine: 90 minutes at most,
# aim under 40 so that the GPU work's tests fit. A run measured before 2026-12-01 took ~50 min;
# the two changes of that day (*) are counted by their measured share:
#   setup (apt packages, .venv) + Release build into build/      ~11 min
#   ctest -j2 (most end-to-end tests run alone: label serial)     ~12 min (was 21)
#     * tests/dist_compression_accuracy.sh: its short form, ~4.5 min (the long form, 13.4 min,
#       is scripts/bench-compression-accuracy.sh)
#   sanitizer build, build-sanitize/ (unit tests + fuzz targets)  12-13 min
#   unit tests under ASan+UBSan                                   ~1 min
#   * fuzzing: 90 s of wall time in all, 2 targets at a time      1.5 min (was 3.7)
#   total                                                         ~38-39 min
# The next large items are the two builds and the other end-to-end tests (~7.5 min together,
# not yet timed one by one: a full run leaves per-test times in
# build/Testing/Temporary/CTestCostData.txt).
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
