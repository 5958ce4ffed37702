#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 7: when every checkpoint of a run is damaged, the trainer must not train again
# from step 0 over them (silently replacing them, exit 0). It stops as a bad job (exit 3, so the
# coordinator does not restart it) with one line naming each damaged checkpoint directory and
# saying how to start over; the checkpoints stay as they were. Before the fix the resume
# skipped both, trained steps 1..6 anew and exited 0.
set -uo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1
checkpointed_run "$work"
c2=$work/out/checkpoints/step-00000002
c4=$work/out/checkpoints/step-00000004
for c in "$c2" "$c4"; do
  s=$c/shard-00000-of-00001.safetensors
  [[ -f $c/manifest.json && -f $s ]] || fail "no checkpoint $c"
  printf 'garbage!' | dd of="$s" bs=1 seek=$(($(stat -c %s "$s") / 2)) conv=notrunc status=none
done
before=$(cat "$c2"/* "$c4"/* | sha256sum)

rc=0
OMP_NUM_THREADS=1 timeout 120 "$T" train --config job6.yaml >train2.log 2>&1 || rc=$?
((rc == 3)) || { cat train2.log; fail "the resume over damaged checkpoints exited $rc, expected 3"; }
err=$(grep "error:" train2.log)
echo "$err"
grep -q "every checkpoint of this run is damaged (2: $c2, $c4;" <<<"$err" ||
  fail "the error does not name both damaged checkpoint directories"
grep -q "Delete these directories .* to start over" <<<"$err" || fail "the error does not say how to start over"
[[ $(grep -c "skipping damaged checkpoint" train2.log) == 2 ]] || fail "each damaged checkpoint's reason is not logged"
[[ $(cat "$c2"/* "$c4"/* | sha256sum) == "$before" ]] || fail "the damaged checkpoints were rewritten"
[[ ! -d $work/out/checkpoints/step-00000006 ]] || fail "the run trained on from step 0"
echo "every checkpoint damaged: exit 3, both directories named, nothing trained or overwritten"

# Deleting them, as the error says, starts over.
rm -rf "$c2" "$c4"
OMP_NUM_THREADS=1 timeout 120 "$T" train --config job6.yaml >train3.log 2>&1 ||
  { cat train3.log; fail "the run did not start over once the damaged checkpoints were deleted"; }
[[ -f $work/out/checkpoints/step-00000006/manifest.json ]] || fail "no checkpoint at step 6 after starting over"
echo "all_checkpoints_damaged: 1 passed, 0 failed"
