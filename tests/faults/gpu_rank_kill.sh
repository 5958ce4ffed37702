#!/usr/bin/env bash
# ctest-labels: integration;serial;faults;gpu
# kill -9 of a GPU rank mid-collective (issue #19): a coordinator and two agents with one GPU
# each (an H200 inventory; the CUDA emulator and its NCCL stand-in where no GPU exists), a job
# with train.device: auto placed on those GPUs (the CUDA engine, fp32, full_shard over NCCL, a
# checkpoint every 4 steps). Rank 1's trainer is killed once a checkpoint is committed: the job
# must restart from the newest committed checkpoint (no committed step lost) and end where an uninterrupted
# single-process CPU run of the same job ends (the tolerance of tests/control_plane_kill.sh).
# Skips (77) where the trainer has no CUDA engine.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/cluster.sh
source "$here/lib/cluster.sh"
# shellcheck source=../lib/resume_job.sh
source "$here/lib/resume_job.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 200 --dev 16 --seed 5 >/dev/null
RJ_NAME=gpu-rank-kill RJ_STEPS=24 RJ_SHARDING=full_shard RJ_NODES=2:2 RJ_RESTARTS=3 RJ_EPOCHS=2
RJ_TRAIN_EXTRA="device: auto, precision: fp32"
"$T" train --config "$(resume_job probe)" --device cuda >"$work/probe.log" 2>&1 || {
  if grep -qE "not available in this build|no usable CUDA device|no CUDA-capable device" "$work/probe.log"; then
    echo "SKIP: $(tail -1 "$work/probe.log")"
    exit 77
  fi
  cat "$work/probe.log"; exit 1
}
RJ_TRAIN_EXTRA="device: cpu" resume_reference

export RINGMASTER_SLOWDOWN=4 RINGMASTER_COLLECTIVE_TIMEOUT_S=30 OMP_NUM_THREADS=1
start_coordinator --lost-after 3s --last-call 1s
start_agent g0 --throughput off --inventory-override '1xNVIDIA H200:sm_90:141GiB'
start_agent g1 --throughput off --inventory-override '1xNVIDIA H200:sm_90:141GiB'
wait_until 30 "two ready agents" ready_nodes 2
id=$("$CP_CLI" submit "$(resume_job out)")
echo "job $id"
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }
committed_at() { committed_at_least "$work/out" "$1"; }
running_gen() { [[ $(job_field "$id" phase) == Running && $(job_field "$id" generation) -ge $1 ]]; }

wait_until 300 "a checkpoint at step 4" committed_at 4 || on_fail "no progress"
grep -qs "train.device: cuda: the CUDA engine (fp32)" "$work"/g*/jobs/"$id"/gen-0/rank-0.log ||
  on_fail "rank 0 is not on the CUDA engine"
c1=$(committed_step "$work/out")
pid=$(rank_pid "$id" 0 1)
[[ -n $pid ]] || on_fail "no trainer of rank 1 to kill"
kill -KILL "$pid"
echo "killed rank 1's trainer (committed: step $c1)"
t=$SECONDS
wait_until 90 "generation 1 running" running_gen 1 || on_fail "no restart after the kill"
echo "     generation 1 running $((SECONDS - t)) s after the kill"
echo "     rank 0 of generation 0 ended with: $(tail -1 "$work"/g*/jobs/"$id"/gen-0/rank-0.log | cut -c1-240)"
check_resumed "$id" 1 "$c1" 120

wait_until 600 "the job to end" job_ended "$id" || on_fail "the job did not end"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
compare_with_reference
((RJ_FAIL == 0)) || cluster_logs
exit $RJ_FAIL
