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
PY=${RINGMASTER_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null

steps=64
job() {  # $1 = output dir
  cat >"$work/$1.yaml" <<YAML
name: kill-test
model:
  config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 3, max_steps: $steps, global_batch_size: 16, micro_batch_size: 8, lr: 2.0e-3,
        warmup_steps: 2, seed: 11, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 100}
distributed: {sharding: full_shard, nodes: "1:2", procs_per_node: 1}
restart: {max_restarts: 5}
YAML
  echo "$work/$1.yaml"
}
"$T" train --config "$(job ref)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }

# Every rank ~20x slower than this CPU can go, so that the kills land mid-job.
export RINGMASTER_SLOWDOWN=20 RINGMASTER_COLLECTIVE_TIMEOUT_S=30 OMP_NUM_THREADS=1
start_coordinator --lost-after 3s --last-call 1s
start_agent a0 --throughput off
start_agent a1 --throughput off
two_ready() { [[ $("$CP_CLI" nodes | grep -c Ready) -eq 2 ]]; }
wait_until 30 "two ready agents" two_ready
id=$("$CP_CLI" submit "$(job out)")
echo "job $id"
fail=0
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }

committed() { committed_step "$work/out"; }
committed_at_least() { (($(committed) >= $1)); }
running_gen() { [[ $(job_field "$id" phase) == Running && $(job_field "$id" generation) -ge $1 ]]; }
# The step generation $1 resumed from, from its rank 0's log.
resumed_step() {
  sed -n 's/.*resumed from .* (step \([0-9]*\),.*/\1/p' "$work"/a*/jobs/"$id"/gen-"$1"/rank-0.log | head -1
}
check_resume() {  # $1 = generation, $2 = newest committed step before the kill
  local k
  wait_until 60 "generation $1 to resume" bash -c "grep -qs 'resumed from' $work/a*/jobs/$id/gen-$1/rank-0.log" ||
    on_fail "generation $1 did not resume from a checkpoint"
  k=$(resumed_step "$1")
  if ((k >= $2)); then
    echo "ok   generation $1 resumed from step $k (newest committed before the kill: $2)"
  else
    echo "FAIL generation $1 resumed from step $k, older than committed step $2"; fail=1
  fi
}

# 1. kill -9 the trainer on a1.
wait_until 120 "a checkpoint at step 8" committed_at_least 8 || on_fail "no progress"
c1=$(committed)
pkill -KILL -f "$work/a1/jobs/$id/gen-0/job.yaml" || on_fail "no trainer of a1 to kill"
echo "killed a1's trainer (committed: step $c1)"
t=$SECONDS
wait_until 60 "generation 1 running" running_gen 1 || on_fail "no restart after the trainer kill"
echo "     generation 1 running $((SECONDS - t)) s after the kill"
check_resume 1 "$c1"

# 2. kill -9 the agent a1 (its trainer gets SIGTERM and checkpoints with its peer), restart it.
wait_until 120 "a checkpoint 8 steps later" committed_at_least $((c1 + 8)) || on_fail "no progress in generation 1"
c2=$(committed)
kill -KILL "${AGENT_PID[a1]}"
echo "killed agent a1 (committed: step $c2)"
start_agent a1 --throughput off  # as systemd's Restart= or a DaemonSet would
t=$SECONDS
wait_until 60 "generation 2 running" running_gen 2 || on_fail "no restart after the agent kill"
echo "     generation 2 running $((SECONDS - t)) s after the kill"
c2b=$(committed)
check_resume 2 "$c2"

# 3. kill -9 the coordinator, restart it on the same database.
wait_until 120 "a checkpoint 4 steps later" committed_at_least $((c2b + 4)) || on_fail "no progress in generation 2"
c3=$(committed)
[[ $(job_field "$id" phase) == Running ]] || on_fail "the job was no longer running at the coordinator kill"
kill -KILL "$COORD_PID"
echo "killed the coordinator (committed: step $c3)"
t=$SECONDS
start_coordinator --lost-after 3s --last-call 1s
wait_until 60 "generation 3 running" running_gen 3 || on_fail "the restored coordinator did not restart the job"
echo "     generation 3 running $((SECONDS - t)) s after the coordinator restarted"
check_resume 3 "$c3"

wait_until 300 "the job to end" bash -c "[[ \$('$CP_CLI' status $id | sed -n 's/^phase: *//p') =~ Succeeded|Failed|Cancelled ]]" ||
  on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
# The trainer kill and the agent kill each cost a restart; the coordinator's own restart does not.
restarts=$(job_field "$id" restarts)
[[ $restarts == 2/5 ]] || { echo "FAIL: restarts $restarts, expected 2/5"; fail=1; }
# The last checkpoint (step 64, written just before the ranks exit) is the job's committed step.
[[ $(job_field "$id" checkpoint) == "step $steps" ]] ||
  { echo "FAIL: status says checkpoint '$(job_field "$id" checkpoint)', expected step $steps"; fail=1; }

# The final lineage's loss at every step against the uninterrupted run; then the weights.
if out=$("$PY" "$here/lib/compare_losses.py" "$work/out/metrics.jsonl" "$work/ref/metrics.jsonl" "$steps"); then
  echo "ok   losses vs uninterrupted run: $out"
else
  echo "FAIL losses vs uninterrupted run: $out"; fail=1
fi
if out=$("$PY" "$here/lib/compare_weights.py" "$work/out/final/model.safetensors" \
  "$work/ref/final/model.safetensors" 5e-5 1e-4); then
  echo "ok   final weights vs uninterrupted run: $out"
else
  echo "FAIL final weights vs uninterrupted run: $out"; fail=1
fi
((fail == 0)) || cluster_logs
exit $fail
