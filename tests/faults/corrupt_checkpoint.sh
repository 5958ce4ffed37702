#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# A corrupted newest checkpoint, through the control plane (docs/reliability.md, "Fault
# scenarios"). Two agents, one CPU rank each, full_shard, a checkpoint every 4 steps. Once a few
# are committed, both trainers are frozen (SIGSTOP, so that nothing moves while the file is
# damaged), 64 bytes in the middle of rank 1's shard of the newest checkpoint are overwritten,
# rank 1 is killed with SIGKILL and rank 0 continued. Expected:
#  - the next generation's ranks skip the damaged checkpoint, saying which file failed its
#    checksum, and resume from the one before it;
#  - the job succeeds with 1 restart, and the step of the damaged checkpoint is written anew;
#  - its losses and final weights equal an uninterrupted single-process run (the tolerance of
#    tests/control_plane_kill.sh: fp32 summation order at world sizes 2 and 1).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/cluster.sh
source "$here/lib/cluster.sh"
# shellcheck source=../lib/resume_job.sh
source "$here/lib/resume_job.sh"
work=$(mktemp -d)
pids=""
trap 'kill -CONT $pids 2>/dev/null || true; cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null
RJ_NAME=corrupt-checkpoint RJ_STEPS=32 RJ_SHARDING=full_shard RJ_NODES=2:2 RJ_RESTARTS=3
resume_reference

export RINGMASTER_SLOWDOWN=20 RINGMASTER_COLLECTIVE_TIMEOUT_S=30 OMP_NUM_THREADS=1
start_coordinator --lost-after 10s --last-call 1s
start_agent a0 --throughput off
start_agent a1 --throughput off
wait_until 30 "two ready agents" ready_nodes 2
id=$("$CP_CLI" submit "$(resume_job out)")
echo "job $id"
on_fail() { echo "FAIL: $*"; "$CP_CLI" status "${id:-}" || true; cluster_logs; exit 1; }
wait_until 120 "a checkpoint at step 12" committed_at_least "$work/out" 12 || on_fail "no progress"

rank0=$(rank_pid "$id" 0 0)
rank1=$(rank_pid "$id" 0 1)
[[ -n $rank0 && -n $rank1 ]] || on_fail "no processes of ranks 0 and 1"
pids="$rank0 $rank1"
kill -STOP $pids
newest=$(committed_step "$work/out")
dir=$(printf '%s/out/checkpoints/step-%08d' "$work" "$newest")
shard=$dir/shard-00001-of-00002.safetensors
[[ -f $shard ]] || on_fail "no shard file $shard"
size=$(stat -c %s "$shard")
head -c 64 /dev/urandom | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
damaged_sum=$(sha256sum <"$shard")
# The step before: resuming from it is the expected outcome.
previous=$(find "$work/out/checkpoints" -maxdepth 2 -name manifest.json | sed -n 's/.*step-0*\([0-9]*\)\/manifest.json/\1/p' |
  sort -n | awk -v n="$newest" '$1 < n' | tail -1)
echo "froze both ranks at committed step $newest; damaged $shard (previous checkpoint: step $previous)"
kill -KILL "$rank1"
kill -CONT "$rank0"

restarted_running() { [[ $(job_field "$id" phase) == Running && $(job_field "$id" generation) -ge 1 ]]; }
wait_until 60 "generation 1 running" restarted_running || on_fail "no restart after the kill"
wait_until 60 "generation 1 to resume" bash -c "grep -qs 'resumed from' $work/a*/jobs/$id/gen-1/rank-0.log" ||
  on_fail "generation 1 did not resume from a checkpoint"
log0=$(ls "$work"/a*/jobs/"$id"/gen-1/rank-0.log)
k=$(resumed_step "$id" 1)
if [[ $k == "$previous" ]]; then
  echo "ok   generation 1 resumed from step $k, the checkpoint before the damaged one"
else
  echo "FAIL generation 1 resumed from step $k, expected $previous"; RJ_FAIL=1
fi
skip=$(grep -h 'skipping damaged checkpoint' "$work"/a*/jobs/"$id"/gen-1/rank-*.log || true)
echo "     $skip" | head -2
grep -q "shard-00001-of-00002.safetensors.*corrupted" <<<"$skip" ||
  { echo "FAIL: no rank says that rank 1's shard of step $newest is corrupted"; RJ_FAIL=1; }
grep -q "skipping damaged checkpoint: .*unreadable on another rank" "$log0" ||
  grep -q "shard-00001-of-00002.safetensors.*corrupted" "$log0" ||
  { echo "FAIL: rank 0 did not skip the damaged checkpoint with its peer"; RJ_FAIL=1; }

wait_until 300 "the job to end" job_ended "$id" || on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
[[ $(job_field "$id" restarts) == 1/3 ]] || { echo "FAIL: restarts $(job_field "$id" restarts), expected 1/3"; RJ_FAIL=1; }
# The damaged checkpoint was replaced when the run reached its step again.
[[ -f $dir/manifest.json && -f $shard && $(sha256sum <"$shard") != "$damaged_sum" ]] ||
  { echo "FAIL: step $newest was not checkpointed again"; RJ_FAIL=1; }
compare_with_reference
((RJ_FAIL == 0)) || cluster_logs
exit $RJ_FAIL
