#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 3 (names): a node name carrying a newline and a fake log line, or one over
# 128 bytes, is refused at Register (INVALID_ARGUMENT naming the rule) and forges no line in the
# coordinator's log, the agent's log or `ringmaster nodes`. Tried with the rogue client (join
# token only) and with a real agent started with --name set to it. Before the fix the name was
# registered and the coordinator's "registered" line split into a forged second line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue

start_coordinator
forged="2001-01-01T00:00:00.000Z INFO ringmaster-coordinator: node node-000009 (admin) FORGED"
evil=$'evil\n'"$forged"

# register NAME: the rogue must be refused with INVALID_ARGUMENT (3) naming the rule
register_refused() {
  local rc=0
  "$ROGUE" register --name "$1" --address 127.0.0.1 >"$work/rogue.out" 2>&1 || rc=$?
  ((rc == 2)) || { cat "$work/rogue.out"; fail "$2: registered (rogue exit $rc)"; }
  grep -q "^refused: 3: register: node_name (.* bytes) must be 1-128 letters, digits" "$work/rogue.out" ||
    { cat "$work/rogue.out"; fail "$2: not INVALID_ARGUMENT naming the rule"; }
}
register_refused "$evil" "a name with a newline"
register_refused "$(printf 'n%.0s' {1..129})" "a 129-byte name"
register_refused $'bell\aname' "a name with a control character"
"$ROGUE" register --name "gpu-01.rack_2" --address 127.0.0.1 >"$work/rogue.out" 2>&1 ||
  { cat "$work/rogue.out"; fail "a valid name was refused"; }
echo "refused at Register: a newline, 129 bytes, a control character; gpu-01.rack_2 accepted"

# A real agent given the name: it keeps retrying, saying why, and logs nothing forged.
"$CP_AGENT" --coordinator "$CP_ADDR:$CP_PORT" --trainer "${TRAINER:?}" --work-dir "$work/evil" \
  --name "$evil" --inventory-override none --throughput off "${CP_AGENT_SECURITY[@]}" \
  >>"$work/evil.log" 2>&1 &
AGENT_PID[evil]=$!
wait_until 30 "the agent to report the refusal" grep -q "must be 1-128 letters" "$work/evil.log" ||
  fail "the agent did not report why it cannot register"
"$CP_CLI" nodes >"$work/nodes.out"
grep -q "evil" "$work/nodes.out" && fail "the evil node is listed"
grep -q "^gpu-01.rack_2 " "$work/nodes.out" || fail "the valid node is not listed"
for f in "$work/coordinator.log" "$work/evil.log" "$work/nodes.out"; do
  if grep -q "^2001-01-01T00:00:00.000Z" "$f"; then
    grep -n "FORGED" "$f"
    fail "a forged line in $f"
  fi
done
grep -q 'evil\\n2001-01-01T00:00:00.000Z' "$work/evil.log" ||
  fail "the agent's log does not show the name escaped"
echo "no forged line in the coordinator's log, the agent's log or ringmaster nodes"
echo "node_name_forgery: 1 passed, 0 failed"
