#!/usr/bin/env bash
# Soak of tests/faults/random_kills.sh: RUNS runs (default 10), each with its own seed and
# RINGMASTER_FAULT_KILLS kills (default 4), one after another. Prints one line per run (seed,
# what was killed when, restarts, the resume checks, pass/fail) and a tally; keeps the output of
# failed runs under the printed directory. Build first (ninja -C build).
#   scripts/soak-random-kills.sh [RUNS]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RINGMASTER_BINARY_DIR=${RINGMASTER_BINARY_DIR:-$ROOT/build}
export TRAINER=${TRAINER:-$RINGMASTER_BINARY_DIR/trainer/ringmaster-trainer}
export RINGMASTER_PYTHON=${RINGMASTER_PYTHON:-$ROOT/.venv/bin/python}
[[ -x $RINGMASTER_PYTHON ]] || RINGMASTER_PYTHON=python3
runs=${1:-10}
out=$(mktemp -d /tmp/soak-random-kills.XXXXXX)
echo "soak: $runs runs of tests/faults/random_kills.sh; failed runs' output kept in $out"
passed=0
for ((r = 1; r <= runs; r++)); do
  seed=$(((RANDOM << 15 | RANDOM) % 1000000))
  log=$out/run-$r.log
  start=$SECONDS
  if RINGMASTER_FAULT_SEED=$seed bash "$ROOT/tests/faults/random_kills.sh" >"$log" 2>&1; then
    verdict=pass
    passed=$((passed + 1))
  else
    verdict="FAIL (log: $log)"
  fi
  echo "run $r seed $seed: $verdict in $((SECONDS - start)) s"
  grep -E '^(kill [0-9]+:|ok   generation|FAIL|restarts:)' "$log" | sed 's/^/    /'
  [[ $verdict == pass && -z ${SOAK_KEEP_LOGS:-} ]] && rm -f "$log"
done
echo "soak: $passed of $runs runs passed"
((passed == runs))
