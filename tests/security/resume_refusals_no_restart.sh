#!/usr/bin/env bash
# ctest-labels: security
# Issue #31, finding 10 (trainer exits): two resumes that can never succeed must stop as the
# job's fault (exit 3: the agent reports it as deterministic and the coordinator restarts
# nothing) with one line saying what is wrong and how to go on.
#   (a) A checkpoint of another model (hidden_size 16 in output.dir, the job says 32) resumed
#       with --resume (train.resume: force, which resumes whatever settings changed): the
#       manifest's layout fingerprint differs. Before the fix: exit 1, a restart per attempt.
#   (b) Every checkpoint directory lost its manifest.json: before the fix the resume found no
#       checkpoint, trained from step 0 over them and exited 0. Now: exit 3 naming the
#       checkpoint directory and each missing manifest, and saying how to start over; the
#       directories stay as they were. Deleting them, as the message says, starts over.
set -uo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1
checkpoint_jobs "$work"
run() { OMP_NUM_THREADS=1 timeout 120 "$T" train "$@"; }
run --config job4.yaml >train1.log 2>&1 || { cat train1.log; fail "the first run failed"; }
ckpts=$work/out/checkpoints
[[ -f $ckpts/step-00000004/manifest.json ]] || fail "no checkpoint of step 4"

# ---- (a) a checkpoint of another model
sed 's/hidden_size: 16/hidden_size: 32/; s/max_steps: 4/max_steps: 6/' job4.yaml >other.yaml
rc=0
run --config other.yaml --resume >other.log 2>&1 || rc=$?
((rc == 3)) || { cat other.log; fail "resuming another model's checkpoint exited $rc, expected 3"; }
grep -q "error: .*checkpoint is of another model" other.log || { cat other.log; fail "the error does not say the checkpoint is of another model"; }
[[ ! -d $ckpts/step-00000006 ]] || fail "the other model trained on"
echo "(a) another model's checkpoint: exit 3, named"

# ---- (b) every manifest deleted
rm "$ckpts"/step-*/manifest.json
before=$(cat "$ckpts"/step-*/* | sha256sum)
rc=0
run --config job6.yaml >nomanifest.log 2>&1 || rc=$?
((rc == 3)) || { cat nomanifest.log; fail "resuming with every manifest deleted exited $rc, expected 3"; }
err=$(grep "error:" nomanifest.log)
echo "$err"
grep -q "no checkpoint of this run has its manifest: $ckpts holds 2 checkpoint directories whose manifest is missing (step-00000002/manifest.json, step-00000004/manifest.json)" <<<"$err" ||
  fail "the error does not name the checkpoint directory and both missing manifests"
grep -q "Delete $ckpts .* to start over" <<<"$err" || fail "the error does not say how to start over"
[[ $(cat "$ckpts"/step-*/* | sha256sum) == "$before" ]] || fail "the checkpoints were rewritten"
[[ ! -d $ckpts/step-00000006 ]] || fail "the run trained on from step 0"
echo "(b) every manifest deleted: exit 3, directory and manifests named, nothing trained"

rm -rf "$ckpts"
run --config job6.yaml >fresh.log 2>&1 || { cat fresh.log; fail "the run did not start over once the checkpoints were deleted"; }
[[ -f $ckpts/step-00000006/manifest.json ]] || fail "no checkpoint at step 6 after starting over"
echo "resume_refusals_no_restart: 1 passed, 0 failed"
