#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# kill -9 mid-job, three times in one job run by a coordinator and two agents (one CPU rank
# each, nodes 1:2): a trainer, then an agent (restarted, as systemd or Kubernetes would), then
# the coordinator (restarted on the same database). The job must complete, each new generation
# must resume from a checkpoint no older than the newest one committed before the kill (no
# committed step lost), and the losses of the steps that made it into the final run, and the
# final weights, must equal an uninterrupted single-process run of the same job (dropout off,
# same global batch). Tolerance: fp32 summation order over 64 AdamW steps at world sizes 2 and 1
# (measured: losses 1.7e-7 relative, weights 1e-5 absolute).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
# shellcheck source=lib/resume_job.sh
source "$here/lib/resume_job.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null
steps=64
RJ_NAME=kill-test RJ_STEPS=$steps RJ_SHARDING=full_shard RJ_NODES=1:2 RJ_RESTARTS=5
resume_reference

# Every rank ~20x slower than this CPU can go, so that the kills land mid-job.
export RINGMASTER_SLOWDOWN=20 RINGMASTER_COLLECTIVE_TIMEOUT_S=30 OMP_NUM_THREADS=1
start_coordinator --lost-after 3s --last-call 1s
start_agent a0 --throughput off
start_agent a1 --throughput off
wait_until 30 "two ready agents" ready_nodes 2
id=$("$CP_CLI" submit "$(resume_job out)")
echo "job $id"
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }

committed() { committed_step "$work/out"; }
committed_at() { committed_at_least "$work/out" "$1"; }
running_gen() { [[ $(job_field "$id" phase) == Running && $(job_field "$id" generation) -ge $1 ]]; }

# 1. kill -9 the trainer on a1.
wait_until 120 "a checkpoint at step 8" committed_at 8 || on_fail "no progress"
c1=$(committed)
pkill -KILL -f "$work/a1/jobs/$id/gen-0/job.yaml" || on_fail "no trainer of a1 to kill"
echo "killed a1's trainer (committed: step $c1)"
t=$SECONDS
wait_until 60 "generation 1 running" running_gen 1 || on_fail "no restart after the trainer kill"
echo "     generation 1 running $((SECONDS - t)) s after the kill"
check_resumed "$id" 1 "$c1"

# 2. kill -9 the agent a1 (its trainer gets SIGTERM and checkpoints with its peer), restart it.
wait_until 120 "a checkpoint 8 steps later" committed_at $((c1 + 8)) || on_fail "no progress in generation 1"
c2=$(committed)
kill -KILL "${AGENT_PID[a1]}"
echo "killed agent a1 (committed: step $c2)"
start_agent a1 --throughput off  # as systemd's Restart= or a DaemonSet would
t=$SECONDS
wait_until 60 "generation 2 running" running_gen 2 || on_fail "no restart after the agent kill"
echo "     generation 2 running $((SECONDS - t)) s after the kill"
c2b=$(committed)
check_resumed "$id" 2 "$c2"

# 3. kill -9 the coordinator, restart it on the same database.
wait_until 120 "a checkpoint 4 steps later" committed_at $((c2b + 4)) || on_fail "no progress in generation 2"
c3=$(committed)
[[ $(job_field "$id" phase) == Running ]] || on_fail "the job was no longer running at the coordinator kill"
kill -KILL "$COORD_PID"
echo "killed the coordinator (committed: step $c3)"
t=$SECONDS
start_coordinator --lost-after 3s --last-call 1s
wait_until 60 "generation 3 running" running_gen 3 || on_fail "the restored coordinator did not restart the job"
echo "     generation 3 running $((SECONDS - t)) s after the coordinator restarted"
check_resumed "$id" 3 "$c3"

wait_until 300 "the job to end" job_ended "$id" ||
  on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
# The trainer kill and the agent kill each cost a restart; the coordinator's own restart does not.
restarts=$(job_field "$id" restarts)
[[ $restarts == 2/5 ]] || { echo "FAIL: restarts $restarts, expected 2/5"; RJ_FAIL=1; }
# The last checkpoint (step 64, written just before the ranks exit) is the job's committed step.
[[ $(job_field "$id" checkpoint) == "step $steps" ]] ||
  { echo "FAIL: status says checkpoint '$(job_field "$id" checkpoint)', expected step $steps"; RJ_FAIL=1; }

# The final lineage's loss at every step against the uninterrupted run; then the weights.
compare_with_reference
((RJ_FAIL == 0)) || cluster_logs
exit $RJ_FAIL
