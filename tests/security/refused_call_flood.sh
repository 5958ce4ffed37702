#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 5 (warnings): a peer hammering a mutual-TLS coordinator with calls it must
# refuse cannot flood the coordinator's log, and every refusal is counted. The rogue client
# (tests/security/rogue_agent.cc) sends 400 Register calls and 400 ListNodes calls with a wrong
# token, then 200 ListNodes calls with no token. Each is refused (UNAUTHENTICATED); the log holds
# at most 5 lines per reason for this peer's host within the minute (security/refusals.h), the
# first of them naming the peer and the method; /metrics counts all of them in
# ringmaster_coordinator_refused_calls_total{reason="wrong_token"|"missing_token"}. Before the
# fix each of the 1000 refusals wrote a WARNING line and nothing counted them. A call with the
# right token still goes through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
command -v curl >/dev/null || { echo "SKIP: needs curl"; exit 77; }
cluster_tls
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
refused() {  # REASON: the counter's value on the coordinator's /metrics
  local v
  v=$(curl -sf "http://127.0.0.1:$mport/metrics" |
    sed -n "s/^ringmaster_coordinator_refused_calls_total{reason=\"$1\"} //p")
  [[ -n $v ]] || fail "/metrics has no ringmaster_coordinator_refused_calls_total{reason=\"$1\"}"
  printf '%.0f\n' "$v"
}
start_coordinator --metrics-listen "127.0.0.1:$mport"
wait_until 30 "/metrics to answer" curl -sf "http://127.0.0.1:$mport/metrics" || fail "no /metrics"
wrong0=$(refused wrong_token)
missing0=$(refused missing_token)

(umask 077; openssl rand -hex 24 >"$work/wrong.token")
flood() {  # WHAT ROGUE-ARGS...: every call must be refused with UNAUTHENTICATED
  local what=$1 rc=0
  shift
  RINGMASTER_JOIN_TOKEN_FILE=$work/wrong.token "$ROGUE" calls "$@" >"$work/rogue.out" 2>&1 || rc=$?
  ((rc == 0)) || { cat "$work/rogue.out"; fail "$what: not all refused (rogue exit $rc)"; }
  echo "$what: $(cat "$work/rogue.out")"
}
flood "400 Register calls with a wrong token" --method register --repeat 400
flood "400 ListNodes calls with a wrong token" --method list-nodes --repeat 400
flood "200 ListNodes calls without a token" --method list-nodes --repeat 200 --token none

log=$work/coordinator.log
wrong_lines=$(grep -c "WARNING ringmaster-coordinator: refused .*: this call needs .*; the token sent is wrong" "$log" || true)
missing_lines=$(grep -c "WARNING ringmaster-coordinator: refused .*: this call needs .*; none was sent" "$log" || true)
all_lines=$(grep -c "refused" "$log" || true)
echo "log: $wrong_lines wrong-token lines, $missing_lines missing-token lines, $all_lines lines saying 'refused'"
((wrong_lines >= 1 && wrong_lines <= 5)) || fail "$wrong_lines wrong-token lines for 800 refusals; 1 to 5 expected"
((missing_lines >= 1 && missing_lines <= 5)) || fail "$missing_lines missing-token lines for 200 refusals; 1 to 5 expected"
((all_lines <= 10)) || fail "$all_lines lines about refusals; at most 10 expected"
grep -q "refused AgentService/Register from ipv4:127.0.0.1:[0-9]*: this call needs the join token; the token sent is wrong" "$log" ||
  fail "the first wrong-token refusal is not logged with the peer and the method"
grep -q "refused Coordinator/ListNodes from ipv4:127.0.0.1:[0-9]*: this call needs the submit token or the join token; none was sent" "$log" ||
  fail "the first missing-token refusal is not logged with the peer and the method"

wrong=$(($(refused wrong_token) - wrong0))
missing=$(($(refused missing_token) - missing0))
echo "/metrics: wrong_token +$wrong, missing_token +$missing"
((wrong == 800)) || fail "ringmaster_coordinator_refused_calls_total{reason=\"wrong_token\"} grew by $wrong, expected 800"
((missing == 200)) || fail "ringmaster_coordinator_refused_calls_total{reason=\"missing_token\"} grew by $missing, expected 200"

"$CP_CLI" nodes >/dev/null || fail "a call with the right token was refused after the flood"
echo "refused_call_flood: 1 passed, 0 failed"
