#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 10 (job file): a submit-token holder cannot store a 1 MiB job file. A job
# file over 256 KiB is refused at SubmitJob with INVALID_ARGUMENT naming its size and the limit,
# and nothing is stored; a real job (a few hundred bytes) is accepted. Before: the cap was
# 1 MiB, and 20 such submissions grew the coordinator by 13.8 MB.
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
cp "$work/job.yaml" "$work/big.yaml"
# Pad to exactly 1 MiB with a comment line.
pad=$((1048576 - $(stat -c %s "$work/job.yaml") - 3))
{ printf '# '; head -c "$pad" /dev/zero | tr '\0' 'x'; echo; } >>"$work/big.yaml"
(($(stat -c %s "$work/big.yaml") == 1048576)) || fail "big.yaml is not 1 MiB"
rc=0
"$ROGUE" submit --job "$work/big.yaml" --base-dir "$work" >"$work/rogue.out" 2>&1 || rc=$?
head -c 300 "$work/rogue.out"
echo
((rc == 2)) || fail "a 1 MiB job file was accepted (rogue exit $rc)"
grep -q "^refused: 3: job.yaml: 1048576 bytes; a job spec may have at most 262144" "$work/rogue.out" ||
  fail "the refusal does not name the size and the limit"
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "a refused job was stored: $("$CP_CLI" list)"
"$ROGUE" submit --job "$work/job.yaml" --base-dir "$work" >"$work/rogue.out" 2>&1 ||
  fail "a small job was refused: $(cat "$work/rogue.out")"
echo "job_file_cap: 1 passed, 0 failed"
