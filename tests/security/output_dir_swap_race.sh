#!/usr/bin/env bash
# ctest-labels: security
# Issue #31, finding 6a: the trainer named its output.dir by path at every write and trusted it
# as the root, so a job author who swapped the directory for a symbolic link while the run went
# on had final/ (the model included), checkpoints/, ranks/ and metrics.jsonl written outside
# the allowed root (7 of 9 tries in the probes). Now output.dir is opened once at start and
# every later write goes through that handle (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
#
# 20 runs of the trainer (confined as under an agent: RINGMASTER_ALLOWED_ROOT) while a second
# process swaps, in a tight loop of renames, output.dir (even runs) or its checkpoints/ (odd
# runs) with a symbolic link to a directory outside the root. The directory is made before the
# run (as a user may), the trainer starts once the loop has swapped it once, and the loop ends
# when the trainer has exited (bounded by an iteration cap). A run may succeed or fail (a link
# met where the trainer resolves a path is refused, at start-up too); nothing may appear
# outside.
set -uo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
root=$work/root outside=$work/outside
mkdir -p "$root" "$outside/target"
checkpoint_jobs "$root"
cd "$root" || exit 1

# swap.py DIR LINK_TARGET READY_FILE STOP_FILE: swaps DIR with a link to LINK_TARGET until
# STOP_FILE exists, making READY_FILE after the first swap; prints the number of swaps made.
cat >"$work/swap.py" <<'PY'
import os, sys
real, target, ready, stop = sys.argv[1:5]
aside, link = real + ".real", real + ".link"
os.symlink(target, link)
swaps, is_link = 0, False
# Each pass flips DIR between the directory and the link, so that each holds about half the time.
for _ in range(20_000_000):  # bound: the trainer's exit normally ends it first
    if os.path.exists(stop):
        break
    try:
        if not is_link:
            os.rename(real, aside)
            try:
                os.rename(link, real)
            except OSError:
                os.rename(aside, real)
                raise
            is_link = True
            swaps += 1
            if swaps == 1:
                open(ready, "w").close()
        else:
            os.rename(real, link)
            os.rename(aside, real)
            is_link = False
    except OSError:
        # The trainer made DIR anew while it was aside: the swaps end with DIR left as it is.
        break
if is_link:  # best effort: the trainer may have made DIR anew meanwhile
    try:
        os.rename(real, link)
        os.rename(aside, real)
    except OSError:
        pass
print(swaps)
PY

succeeded=0
for i in $(seq 1 20); do
  out=$root/out-$i
  sed "s|dir: out,|dir: $out,|" job6.yaml >"job-$i.yaml"
  dir=$out
  ((i % 2)) && dir=$out/checkpoints
  mkdir -p "$dir"
  rm -f "$work/stop" "$work/ready"
  python3 "$work/swap.py" "$dir" "$outside/target" "$work/ready" "$work/stop" >"$work/swaps-$i" &
  swapper=$!
  for _ in $(seq 1 3000); do  # waits for the first swap (at most ~30 s)
    [[ -e $work/ready ]] && break
    sleep 0.01
  done
  [[ -e $work/ready ]] || fail "the swapper of run $i made no swap"
  rc=0
  RINGMASTER_ALLOWED_ROOT=$root OMP_NUM_THREADS=1 timeout 120 "$T" train --config "job-$i.yaml" \
    >"run-$i.log" 2>&1 || rc=$?
  touch "$work/stop"
  wait "$swapper" || fail "the swapper of run $i failed"
  n=$(<"$work/swaps-$i")
  echo "run $i: swapped $(basename "$dir") $n times, trainer exit $rc"
  ((rc == 0)) && succeeded=$((succeeded + 1))
  found=$(find "$outside" -mindepth 1 ! -path "$outside/target" -print)
  [[ -z $found ]] || { tail -5 "run-$i.log"; fail "run $i wrote outside the root: $found"; }
done
echo "20 runs ($succeeded exited 0): nothing written outside"
echo "output_dir_swap_race: 1 passed, 0 failed"
