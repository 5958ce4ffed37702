#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 3 (registry): a join-token holder registering 2000 nodes in a burst, each with
# the largest inventory the caps allow (~4.6 KB), no longer breaks `ringmaster nodes`: before
# the fix the one ListNodes response grew past gRPC's 4 MiB limit ("Received message larger
# than max"), for good, also after a restart. Now ListNodes pages (at most ~2 MiB a page) and
# the CLI follows the pages, listing every node. The flood's nodes never heartbeat: once lost
# for --forget-lost-after they are forgotten (log line, registry, database, their /metrics
# series), while the real agent's node stays; a restarted coordinator does not bring them back.
# The flood comes from one host, so the per-host Register rate is off here (--register-rate 0):
# this test is about paging and forgetting; register_field_caps.sh covers the rate.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
command -v curl >/dev/null || { echo "SKIP: needs curl"; exit 77; }
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
series() { curl -sf "http://127.0.0.1:$mport/metrics" | grep -c '^ringmaster_node_heartbeat_age_seconds{' || true; }
node_count() { "$CP_CLI" nodes | tail -n +2 | grep -c . || true; }

flags=(--lost-after 2s --forget-lost-after 20s --metrics-listen "127.0.0.1:$mport" --register-rate 0)
start_coordinator "${flags[@]}"
start_agent good --throughput off
wait_until 30 "agent good Ready" ready_nodes 1 || fail "the good agent did not register"

start=$SECONDS
"$ROGUE" register --name flood --address 127.0.0.1 --repeat 2000 >"$work/rogue.out" 2>&1 ||
  { cat "$work/rogue.out"; fail "the flood was refused"; }
echo "$(cat "$work/rogue.out") in $((SECONDS - start)) s"

"$CP_CLI" nodes >"$work/nodes.out" 2>&1 || { tail -c 300 "$work/nodes.out"; fail "ringmaster nodes failed"; }
n=$(tail -n +2 "$work/nodes.out" | grep -c .)
((n == 2001)) || fail "ringmaster nodes listed $n nodes, expected 2001"
grep -q "^good .*Ready" "$work/nodes.out" || fail "good is not listed Ready"
s=$(series)
((s == 2001)) || fail "/metrics has $s node series, expected 2001"
echo "ringmaster nodes: all 2001 nodes listed; /metrics: $s node series"

# The flood's nodes are lost at once (never heartbeat) and forgotten 20 s after registering.
one_node() { (($(node_count) == 1)); }
wait_until 90 "the flood's nodes to be forgotten" one_node ||
  fail "the lost nodes were not forgotten: $(node_count) listed"
"$CP_CLI" nodes | grep -q "^good .*Ready" || fail "good was forgotten too"
grep -q "node node-[0-9]* (flood-0) forgotten: lost for .* (--forget-lost-after 20s)" \
  "$work/coordinator.log" || fail "forgetting is not logged"
s=$(series)
((s == 1)) || fail "/metrics still has $s node series"
echo "after --forget-lost-after: 1 node listed (good), 1 node series"

kill -TERM "$COORD_PID"
timeout 30 tail --pid="$COORD_PID" -f /dev/null || fail "the coordinator did not stop"
start_coordinator "${flags[@]}"
((n = $(node_count), n == 1)) || fail "the restarted coordinator lists $n nodes"
echo "restarted coordinator: the forgotten nodes stay forgotten"
echo "node_registry_flood: 1 passed, 0 failed"
