#!/usr/bin/env bash
# ctest-labels: security;integration;serial
# Issue #20, item 1: a holder of the join token (and a client certificate) cannot take another
# node's Heartbeat stream. Against a mutual-TLS coordinator with both tokens and one real agent
# ("good"), a rogue client (tests/security/rogue_agent.cc) with only the join token tries:
#   1. a Heartbeat stream naming good's node id (ids are sequential; ListNodes shows them),
#      without a node secret and with a made-up one;
#   2. registering the name "good" again from good's own address, then opening the stream that
#      registration would allow.
# Each is refused (PERMISSION_DENIED) and logged by the coordinator with the rogue's address; a
# flood of 300 such streams is refused too and logs at most 5 lines a minute (per kind and host).
# Afterwards good still holds its node: a job submitted then runs on it to Succeeded, and good
# never lost its stream. Before the fix, attempt 1 kept a stream open and cut good off.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
cluster_tls
export RINGMASTER_JOIN_TOKEN_FILE=$work/tls/join.token

start_coordinator --last-call 1s
start_agent good --address 127.0.0.1 --throughput off
ready() { "$CP_CLI" nodes | grep -q "^$1 .*Ready"; }
wait_until 30 "agent good Ready" ready good || fail "the good agent did not register"
id=$("$CP_CLI" nodes | awk '$1 == "good" {print $2}')
[[ $id == node-* ]] || fail "no node id for good: '$id'"
echo "agent good: Ready as $id"

# ---- 1. a stream naming good's id: no secret, a made-up secret
attempt() {  # WHAT ARGS...: the rogue must be refused with PERMISSION_DENIED (7)
  local what=$1 rc=0
  shift
  "$ROGUE" "$@" --hold 4 >"$work/rogue.out" 2>&1 || rc=$?
  tail -n 1 "$work/rogue.out"
  ((rc == 2)) || fail "$what: not refused (rogue exit $rc)"
  grep -q "^refused: 7: " "$work/rogue.out" || fail "$what: not PERMISSION_DENIED"
}
attempt "a stream without a secret" heartbeat --node-id "$id"
grep -q "no node secret" "$work/rogue.out" || fail "the refusal does not say why"
attempt "a stream with a made-up secret" heartbeat --node-id "$id" --secret "$(openssl rand -hex 32)"
logged() {
  grep -q "WARNING ringmaster-coordinator: refused AgentService/Heartbeat from ipv4:127.0.0.1:[0-9]*: heartbeat stream for node $id: $1" \
    "$work/coordinator.log"
}
logged "no node secret" || fail "the refused stream is not logged with the peer address"
logged "a wrong node secret" || fail "the stream with a wrong secret is not logged"
echo "refused and logged: streams for $id without its secret"
# A flood of 300 attempts: every one refused, at most 5 logged per minute for this kind of refusal
# and this host (security/refusals.h; the rest counted).
attempt "300 streams in a row" heartbeat --node-id "$id" --repeat 300
n=$(grep -c "refused AgentService/Heartbeat" "$work/coordinator.log")
((n <= 5)) || fail "$n refusals logged within a minute; at most 5 expected"
echo "flood: 300 refused, $n lines logged"

# ---- 2. registering good's name again from its address
attempt "re-registering good" register --name good --address 127.0.0.1
grep -q "has a connected agent" "$work/rogue.out" || fail "the refusal does not say why"
grep -q "refused AgentService/Register from ipv4:127.0.0.1:[0-9]*: node good ($id) has a connected agent" \
  "$work/coordinator.log" || fail "the refused registration is not logged with the peer address"
echo "refused and logged: registering the name good while its agent is connected"

# ---- good still holds its node: a job runs on it
tiny_job "$work"
job=$("$CP_CLI" submit "$work/job.yaml") || fail "submit failed"
wait_until 300 "job $job to end" job_ended "$job" || fail "the job did not end"
[[ $(job_field "$job" phase) == Succeeded ]] || { "$CP_CLI" status "$job"; fail "job $job did not succeed"; }
grep -q "job $job generation 0: started 1 rank" "$work/good.log" || fail "good did not start the job"
grep -q "lost the coordinator" "$work/good.log" && fail "good lost its stream"
echo "job $job: Succeeded on good, which kept its stream"
echo "heartbeat_hijack: 1 passed, 0 failed"
