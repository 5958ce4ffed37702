#!/usr/bin/env bash
# ctest-labels: security;integration;serial
# Issue #31, finding 7 and GetLogs' rank check (finding 10): a node's answer to a log request
# counts only when it comes from the node asked. A real agent ("good") runs a one-rank job; a
# rogue client with the join token registers a node of its own and, every 20 ms, answers each
# SendLogs command id 1..200 with a forged line carrying terminal escapes ("FORGED"). 20 calls of
# `ringmaster logs JOB --rank 0` must all show good's own log and never a forged line. GetLogs
# with rank 4294967295 (and 1) is refused with INVALID_ARGUMENT naming the job's ranks.
# Before the fix the pending answers were matched by command id alone and the rogue's answers
# came back to `ringmaster logs` (19 of 40 calls in the probe); rank 4294967295 said "no rank -1".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue

start_coordinator --last-call 1s
start_agent good --address 127.0.0.1 --throughput off
wait_until 30 "agent good Ready" ready_nodes 1 || fail "the good agent did not register"
tiny_job "$work"
job=$("$CP_CLI" submit "$work/job.yaml") || fail "submit failed"
wait_until 300 "job $job to end" job_ended "$job" || fail "the job did not end"
[[ $(job_field "$job" phase) == Succeeded ]] || { "$CP_CLI" status "$job"; fail "job $job did not succeed"; }
rank_log=$(ls "$work"/good/jobs/*/gen-*/rank-0.log 2>/dev/null | head -n 1)
[[ -s $rank_log ]] || fail "no rank-0 log on good"
echo "job $job: Succeeded on good ($rank_log)"

# ---- GetLogs' rank is checked as the unsigned number it is
for rank in 4294967295 1; do
  rc=0
  "$ROGUE" get-logs --job "$job" --rank "$rank" >"$work/get.out" 2>&1 || rc=$?
  tail -n 1 "$work/get.out"
  ((rc == 2)) || fail "GetLogs rank $rank: not refused (rogue exit $rc)"
  grep -q "^refused: 3: logs: rank $rank is out of range: job $job has ranks 0 to 0$" "$work/get.out" ||
    fail "GetLogs rank $rank: not INVALID_ARGUMENT naming the job's ranks"
done
"$ROGUE" get-logs --job "$job" --rank 0 >"$work/get.out" 2>&1 || { cat "$work/get.out"; fail "rank 0 refused"; }

# ---- a rogue node answering every log request it can guess
"$ROGUE" forge-logs --name rogue --address 127.0.0.1 --hold 120 --ids 200 >"$work/rogue.out" 2>&1 &
rogue_pid=$!
rogue_ready() { "$CP_CLI" nodes | grep -q "^rogue .*Ready"; }
wait_until 30 "the rogue node Ready" rogue_ready || { cat "$work/rogue.out"; fail "the rogue did not register"; }
last=$(tail -n 1 "$rank_log")
[[ -n $last ]] || fail "the rank's log ends with an empty line"
for i in $(seq 1 20); do
  "$CP_CLI" logs "$job" --rank 0 >"$work/logs.$i.out" 2>&1 || { cat "$work/logs.$i.out"; fail "logs call $i failed"; }
  if grep -q "FORGED" "$work/logs.$i.out"; then
    cat -v "$work/logs.$i.out" | head -n 5
    fail "logs call $i showed the rogue's forged line"
  fi
  grep -qxF -- "$last" "$work/logs.$i.out" || { cat "$work/logs.$i.out"; fail "logs call $i lacks good's last line"; }
done
kill -0 "$rogue_pid" 2>/dev/null || { cat "$work/rogue.out"; fail "the rogue's stream ended early"; }
kill -TERM "$rogue_pid"
wait "$rogue_pid" 2>/dev/null || true
grep -q "node node-[0-9]* sent a log answer (command [0-9]*) it was not asked for; ignored" \
  "$work/coordinator.log" || fail "the forged answers were not logged"
n=$(grep -c "it was not asked for" "$work/coordinator.log")
((n == 1)) || fail "$n lines logged about forged answers; one expected"
echo "20 logs calls: good's log each time, no forged line; the rogue's answers ignored (logged once)"
echo "forged_log_answer: 1 passed, 0 failed"
