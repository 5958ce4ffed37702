#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 5 (request fields): a submit-token holder cannot store megabytes per call in
# the coordinator's database. Refused with INVALID_ARGUMENT naming the field and the limit: a
# 2 MiB request_id, a 3 MiB base_dir, and a base_dir with a NUL byte in it (which would cut the
# path short in the trainer's C calls); nothing is stored (no job listed, the database stays
# small). A request at the limits (128-byte request_id) is accepted. Before the fix all three
# were accepted and stored.
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

refused() {  # WHAT PATTERN ARGS...: the submission must be INVALID_ARGUMENT (3) saying PATTERN
  local what=$1 pattern=$2 rc=0
  shift 2
  "$ROGUE" submit --job "$work/job.yaml" "$@" >"$work/rogue.out" 2>&1 || rc=$?
  head -c 300 "$work/rogue.out"
  echo
  ((rc == 2)) || fail "$what: accepted (rogue exit $rc)"
  grep -q "^refused: 3: $pattern" "$work/rogue.out" || fail "$what: not INVALID_ARGUMENT naming the limit"
}
refused "a 2 MiB request_id" "submit: request_id is 2097152 bytes; at most 128 are accepted" \
  --base-dir "$work" --request-id-bytes 2097152
refused "a 3 MiB base_dir" "submit: base_dir is 3145728 bytes; at most 4096 are accepted" \
  --base-dir-bytes 3145728
refused "a base_dir with a NUL" "submit: base_dir holds a control character (byte 0x00)" \
  --base-dir "$work/a\\0/../b"
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "a refused job was stored: $("$CP_CLI" list)"
size=$(($(stat -c %s "$work/coord.db") + $(stat -c %s "$work/coord.db-wal" 2>/dev/null || echo 0)))
((size < 1048576)) || fail "the database grew to $size bytes"
"$ROGUE" submit --job "$work/job.yaml" --base-dir "$work" --request-id-bytes 128 >"$work/rogue.out" 2>&1 ||
  fail "a request at the limits was refused: $(cat "$work/rogue.out")"
echo "refused: oversized request_id and base_dir, a NUL in base_dir; database $size bytes"
echo "request_caps: 1 passed, 0 failed"
