#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 10 (idle streams): a token holder cannot hold open streams, a server thread
# each, without bound. With --max-streams-per-peer 4:
#   - 12 WatchJob streams from one host: 4 open, the next 8 refused with RESOURCE_EXHAUSTED, and
#     the coordinator's thread count grows by less than 12 while they are held;
#   - 8 Heartbeat streams that never send a first message: 4 are refused at once with
#     RESOURCE_EXHAUSTED, the 4 others are cancelled at the 10 s first-message deadline.
# Before: every stream was accepted and held a thread until the client left (1,500 idle Heartbeat
# and 1,500 WatchJob streams: 3,018 threads).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
start_coordinator --max-streams-per-peer 4
tiny_job "$work"
cd "$work"
id=$("$CP_CLI" submit job.yaml) || fail "submit failed"  # no agent: it waits in Rendezvous
threads() { sed -n 's/^Threads:\s*//p' "/proc/$COORD_PID/status"; }
before=$(threads)
timeout 60 "$ROGUE" idle-streams --method watch --job "$id" --count 12 --hold 3 >watch.out 2>&1 &
rogue=$!
wait_until 30 "the watch streams to be held" grep -q holding watch.out || fail "no streams held"
during=$(threads)
wait "$rogue" || fail "the watch rogue failed: $(cat watch.out)"
cat watch.out
grep -q "^open: 4 refused: 8 ( 8 8 8 8 8 8 8 8 )" watch.out ||
  fail "not 4 watch streams open and 8 refused with RESOURCE_EXHAUSTED"
echo "threads: $before before, $during while the streams were held"
((during - before < 12)) || fail "the coordinator's threads grew from $before to $during"
grep -q "refused Coordinator/WatchJob from .*--max-streams-per-peer" "$work/coordinator.log" ||
  fail "the refusal is not logged"

rc=0
timeout 60 "$ROGUE" idle-streams --method heartbeat --count 8 >hb.out 2>&1 || rc=$?
cat hb.out
((rc == 0)) || fail "the heartbeat rogue failed (exit $rc)"
ended=$(sed -n 's/^ended://p' hb.out | tr ' ' '\n' | sort | tr '\n' ' ')
[[ $ended == " 1 1 1 1 8 8 8 8 " ]] ||
  fail "heartbeat streams ended with codes '$ended', expected four CANCELLED (1) and four RESOURCE_EXHAUSTED (8)"
echo "idle_stream_cap: 1 passed, 0 failed"
