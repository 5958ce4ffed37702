#!/usr/bin/env bash
# ctest-labels: integration;serial
# Training that diverges under fp32 (a learning rate of 1e6 without clipping drives the loss to
# NaN/inf within a few steps): the job run by a coordinator and an agent must fail at once —
# no restart loop — with `ringmaster status` saying "diverged" and naming the step, the trainer
# must exit 4, and the checkpoint committed before the divergence must stay the latest (nothing
# committed is lost; no checkpoint of non-finite weights is written).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 200 --dev 20 --seed 4 >/dev/null
fail() { echo "FAIL: $*"; "$CP_CLI" status "${id:-none}" || true; cluster_logs; exit 1; }

# The same job standalone first: where it diverges, and the trainer's exit status.
job() {  # $1 = output dir, $2 = steps
  cat >"$work/$1.yaml" <<YAML
name: diverge-test
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {max_steps: $2, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e+6,
        lr_schedule: constant, warmup_steps: 0, max_grad_norm: 0, seed: 2}
output: {dir: $1, checkpoint_every_steps: 1}
restart: {max_restarts: 3}
YAML
  echo "$work/$1.yaml"
}
status=0
"$T" train --config "$(job solo 50)" >"$work/solo.log" 2>&1 || status=$?
((status == 4)) || { cat "$work/solo.log"; fail "standalone trainer exited $status, expected 4"; }
msg=$(grep -o '\(loss\|gradient norm\) is [^ ]* at step [0-9]* (fp32): training diverged' "$work/solo.log" | head -1)
[[ -n $msg ]] || { cat "$work/solo.log"; fail "no divergence message naming the step"; }
bad_step=$(sed 's/.* at step \([0-9]*\) .*/\1/' <<<"$msg")
last=$(committed_step "$work/solo")
echo "standalone: exit 4, '$msg'; last committed checkpoint step $last"
((last == bad_step - 1)) || fail "last checkpoint $last, expected step $((bad_step - 1)) (the one before)"
# The committed checkpoint holds finite weights: a fresh run resumes from it (and diverges at the
# same step again, which shows the state is the same).
cp -r "$work/solo" "$work/again"
status=0
"$T" train --config "$(job again 50)" >"$work/again.log" 2>&1 || status=$?
grep -q "resumed from .*step-0*$last" "$work/again.log" || { cat "$work/again.log"; fail "no resume from step $last"; }
grep -q "at step $bad_step (fp32): training diverged" "$work/again.log" || fail "the resumed run did not diverge at step $bad_step again"

# Through the control plane: failed at once, not restarted.
export OMP_NUM_THREADS=1
start_coordinator --lost-after 10s --last-call 1s
start_agent a0 --throughput off
one_ready() { [[ $("$CP_CLI" nodes | grep -c Ready) -eq 1 ]]; }
wait_until 30 "a ready agent" one_ready || fail "agent"
sed -i 's/^restart: .*/restart: {max_restarts: 3}\ndistributed: {nodes: "1:1", procs_per_node: 1}/' "$(job cp 50)"
id=$("$CP_CLI" submit "$work/cp.yaml")
failed() { [[ $(job_field "$id" phase) == Failed ]]; }
wait_until 120 "the job Failed" failed || fail "the job did not fail"
err=$(job_field "$id" error)
echo "control plane: $err"
grep -q "(diverged)" <<<"$err" || fail "status does not say diverged: $err"
grep -q "at step $bad_step" <<<"$err" || fail "status does not name step $bad_step: $err"
[[ $(job_field "$id" restarts) == 0/3 ]] || fail "restarted: $(job_field "$id" restarts)"
((bad_step > 1)) || fail "diverged at step 1: the test needs a checkpoint before the divergence"
echo "PASS: diverged at step $bad_step, failed at once, checkpoint $last kept"
