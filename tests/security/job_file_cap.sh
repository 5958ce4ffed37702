#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 10 (job file): a submit-token holder cannot store a 1 MiB job file, and every
# reader of a job file has the same limit (jobspec/job_spec.h kMaxJobFileBytes, 256 KiB):
#   - a 1 MiB and a 300 KiB job file sent straight to SubmitJob (the hostile client, no CLI
#     check, no file name: "job.yaml") are refused with INVALID_ARGUMENT naming the file, its
#     size and the limit, and nothing is stored;
#   - the same 300 KiB file is refused with the same line by `ringmaster submit` (before
#     anything is sent), `ringmaster local` and `ringmaster-trainer train --config` (exit 3);
#   - a real job (a few hundred bytes) is accepted.
# Before: the coordinator's cap was 1 MiB (20 such submissions grew it by 13.8 MB); after it was
# cut to 256 KiB, the trainer, `local` and `submit` still read 1 MiB: a 300 KiB file ran under
# `ringmaster-trainer` and `ringmaster local` but was refused by the coordinator.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
cluster_tls
start_coordinator
tiny_job "$work"
# pad FILE BYTES: job.yaml padded to exactly BYTES with a comment line.
pad() {
  cp "$work/job.yaml" "$work/$1"
  local n=$(($2 - $(stat -c %s "$work/job.yaml") - 3))
  { printf '# '; head -c "$n" /dev/zero | tr '\0' 'x'; echo; } >>"$work/$1"
  (($(stat -c %s "$work/$1") == $2)) || fail "$1 is not $2 bytes"
}
pad big.yaml 1048576
pad mid.yaml 307200
cd "$work"
limit="bytes; a job file may have at most 262144 bytes (256 KiB)"
for f in big.yaml mid.yaml; do
  rc=0
  "$ROGUE" submit --job "$f" --base-dir "$work" >"rogue.out" 2>&1 || rc=$?
  head -c 300 rogue.out
  echo
  ((rc == 2)) || fail "SubmitJob accepted $f (rogue exit $rc)"
  # The hostile client sends no file name: the coordinator calls it job.yaml.
  grep -qF "refused: 3: job.yaml: $(stat -c %s "$f") $limit" rogue.out ||
    fail "SubmitJob's refusal of $f does not name the file, its size and the limit"
done
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "a refused job was stored: $("$CP_CLI" list)"

want="mid.yaml: 307200 $limit"
rc=0
"$CP_CLI" submit mid.yaml >submit.out 2>&1 || rc=$?
cat submit.out
((rc != 0)) && grep -qF "$want" submit.out || fail "ringmaster submit: not refused with '$want'"
rc=0
timeout 60 "$CP_CLI" local mid.yaml --trainer "$TRAINER" --coordinator-binary "$CP_COORD" \
  --agent-binary "$CP_AGENT" >local.out 2>&1 || rc=$?
cat local.out
((rc == 2)) && grep -qF "$want" local.out || fail "ringmaster local: exit $rc, not '$want'"
rc=0
"$TRAINER" train --config mid.yaml >trainer.out 2>&1 || rc=$?
tail -n 3 trainer.out
((rc == 3)) && grep -qF "$want" trainer.out || fail "ringmaster-trainer: exit $rc, not '$want'"
[[ ! -e out ]] || fail "the trainer wrote output for a refused job file"
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "a refused job was stored: $("$CP_CLI" list)"

"$ROGUE" submit --job job.yaml --base-dir "$work" >rogue.out 2>&1 ||
  fail "a small job was refused: $(cat rogue.out)"
echo "job_file_cap: 1 passed, 0 failed"
