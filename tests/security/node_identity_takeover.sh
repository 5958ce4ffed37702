#!/usr/bin/env bash
# ctest-labels: security;integration;serial
# Issue #31, finding 5 and the reconnect delay of finding 10: a holder of the join token cannot
# take a known node's name while its agent is away or after a coordinator restart, and an agent
# is back within a few seconds of its coordinator's return. Against a mutual-TLS coordinator
# with both tokens, one real agent ("good") and the rogue client (join token only):
#   1. good's agent stopped: the rogue registers "good" from good's address with good's node id
#      (as ListNodes shows it) and no secret: refused (PERMISSION_DENIED); good, restarted on its
#      work dir, registers as the same node again.
#   2. the coordinator stopped for 12 s and restarted: the rogue, registering "good" at once, is
#      refused; good is Ready as the same node within 8 s of the coordinator answering again.
#      Then with good's agent stopped across a coordinator restart: the rogue is refused (the
#      restored node's secret digest), and good, started again, gets its node back.
#   3. `ringmaster nodes forget good`: refused with the join token, refused while good is
#      connected; with good stopped it frees the name and the rogue may register it.
# Before the fix the rogue got good's node in 1 and 2 (a new secret, good's next StartRanks),
# good reconnected 24 s after the coordinator's return, and `nodes forget` did not exist.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
cluster_tls
export RINGMASTER_JOIN_TOKEN_FILE=$work/tls/join.token

start_coordinator
start_agent good --address 127.0.0.1 --throughput off
# ready_as ID: good is Ready under a node id starting with ID
ready_as() { "$CP_CLI" nodes | awk -v id="$1" '$1 == "good" && index($2, id) == 1 && /Ready/' | grep -q .; }
wait_until 30 "agent good Ready" ready_as node- || fail "the good agent did not register"
id=$("$CP_CLI" nodes | awk '$1 == "good" {print $2}')
[[ $id == node-* ]] || fail "no node id for good: '$id'"
echo "agent good: Ready as $id"

stop_good() {
  kill -TERM "${AGENT_PID[good]}"
  timeout 30 tail --pid="${AGENT_PID[good]}" -f /dev/null || fail "the good agent did not stop"
}
# rogue_refused WHAT [WHY]: the rogue's registration of "good" must be refused with
# PERMISSION_DENIED, the message matching WHY (default: the agent is away)
rogue_refused() {
  local rc=0 why=${2:-"is registered; registering it again without node secret"}
  "$ROGUE" register --name good --address 127.0.0.1 --previous-node-id "$id" >"$work/rogue.out" 2>&1 ||
    rc=$?
  tail -n 1 "$work/rogue.out"
  ((rc == 2)) || fail "$1: the rogue registered good (rogue exit $rc)"
  grep -Eq "^refused: 7: node good \($id\) ($why)" "$work/rogue.out" ||
    fail "$1: not PERMISSION_DENIED saying why"
}

# ---- 1. while good's agent is away
stop_good
rogue_refused "good's agent away"
grep -q "refused AgentService/Register from ipv4:127.0.0.1:[0-9]*: node good ($id) is registered" \
  "$work/coordinator.log" || fail "the refused registration is not logged with the peer address"
start_agent good --address 127.0.0.1 --throughput off
wait_until 30 "agent good Ready again" ready_as "$id" || fail "good did not get its node $id back"
grep -q "registering as node $id again (identity from $work/good/node-identity)" "$work/good.log" ||
  fail "the restarted agent did not take its identity from its work dir"
echo "away: the rogue refused; good restarted and Ready as $id again"

# ---- 2. across a coordinator restart
kill -TERM "$COORD_PID"
timeout 30 tail --pid="$COORD_PID" -f /dev/null || fail "the coordinator did not stop"
# Long enough for the agent's backoff to grow (it doubles up to 10 s).
sleep 12
start_coordinator
back=$SECONDS
# good may be back already (then it is connected), or not yet: refused either way.
rogue_refused "just after the coordinator's restart" \
  "is registered; registering it again without node secret|has a connected agent"
wait_until 30 "agent good Ready after the restart" ready_as "$id" ||
  fail "good did not get its node back after the restart"
took=$((SECONDS - back))
echo "restart: the rogue refused; good Ready as $id ${took} s after the coordinator answered"
((took < 8)) || fail "good took ${took} s to reconnect; at most 8 s expected"
# The name held for an agent that is not back yet: the restored node's secret digest.
stop_good
kill -TERM "$COORD_PID"
timeout 30 tail --pid="$COORD_PID" -f /dev/null || fail "the coordinator did not stop"
start_coordinator
rogue_refused "after a restart, good's agent away"
start_agent good --address 127.0.0.1 --throughput off
wait_until 30 "agent good Ready again" ready_as "$id" || fail "good did not get its node $id back"
echo "restart with good away: the rogue refused; good restarted and Ready as $id again"

# ---- 3. ringmaster nodes forget
rc=0
RINGMASTER_TOKEN_FILE=$work/tls/join.token "$CP_CLI" nodes forget good >"$work/forget.out" 2>&1 || rc=$?
((rc != 0)) || fail "nodes forget succeeded with the join token"
grep -q "needs the submit token" "$work/forget.out" || { cat "$work/forget.out"; fail "not refused for the token"; }
rc=0
"$CP_CLI" nodes forget good >"$work/forget.out" 2>&1 || rc=$?
((rc != 0)) || fail "nodes forget succeeded while good is connected"
grep -q "has a connected agent; stop that agent first" "$work/forget.out" ||
  { cat "$work/forget.out"; fail "the refusal does not say why"; }
closed() { (($(grep -c "node $id: heartbeat stream closed" "$work/coordinator.log") > $1)); }
closed_before=$(grep -c "node $id: heartbeat stream closed" "$work/coordinator.log" || true)
stop_good
wait_until 30 "good's stream to close" closed "$closed_before" || fail "good's stream did not close"
"$CP_CLI" nodes forget good >"$work/forget.out" 2>&1 || { cat "$work/forget.out"; fail "nodes forget good failed"; }
grep -q "node $id (good) forgotten by an operator" "$work/coordinator.log" ||
  fail "the coordinator did not log the operator's forget"
"$CP_CLI" nodes | grep -q " $id " && fail "$id is still listed"
"$ROGUE" register --name good --address 127.0.0.1 >"$work/rogue.out" 2>&1 ||
  { cat "$work/rogue.out"; fail "the freed name could not be registered"; }
grep -q "^registered: node-" "$work/rogue.out" || fail "no new node id"
grep -q "^registered: $id$" "$work/rogue.out" && fail "the freed name got the old id"
echo "forget: refused with the join token and while connected; then the name was free"
echo "node_identity_takeover: 1 passed, 0 failed"
