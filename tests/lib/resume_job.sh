# The job of the tests that kill, freeze, cut off or damage a run, and their common checks: every
# new generation resumes from a checkpoint no older than the newest one committed before the
# fault, and the run ends where an uninterrupted single-process run of the same job ends
# (sourced after lib/cluster.sh; files under $CP_WORK, data in $CP_WORK/data).
#
#   resume_job OUT          writes $CP_WORK/OUT.yaml (output dir OUT) and prints its path. BERT
#                           H64 L2, no dropout, a checkpoint every 4 steps, all kept. Set before:
#                           RJ_NAME, RJ_STEPS, RJ_SHARDING, RJ_NODES, RJ_RESTARTS; optional
#                           RJ_SEED (11), RJ_BATCH (16, global), RJ_EPOCHS (3), RJ_TRAIN_EXTRA
#                           (more train keys, e.g. "device: auto, precision: fp32")
#   resume_reference        runs the job in one process into $CP_WORK/ref (exits on failure)
#   rank_pid JOB GEN RANK   pid of the trainer of rank RANK in generation GEN, or nothing
#   resumed_step JOB GEN    the step generation GEN resumed from (its rank 0's log), or nothing
#   check_resumed JOB GEN MIN [SECONDS]
#                           waits for generation GEN to resume and checks it resumed from step
#                           MIN or later; prints ok/FAIL, sets RJ_FAIL=1 on failure
#   compare_with_reference  losses of every step and final weights of $CP_WORK/out against
#                           $CP_WORK/ref (5e-5 absolute / 1e-4 relative: fp32 summation order
#                           at different world sizes); prints ok/FAIL, sets RJ_FAIL=1 on failure
RJ_FAIL=0

resume_job() {
  cat >"$CP_WORK/$1.yaml" <<YAML
name: ${RJ_NAME:?}
model:
  config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: ${RJ_EPOCHS:-3}, max_steps: ${RJ_STEPS:?}, global_batch_size: ${RJ_BATCH:-16},
        micro_batch_size: 8, lr: 2.0e-3, warmup_steps: 2, seed: ${RJ_SEED:-11}, max_grad_norm: 0.5${RJ_TRAIN_EXTRA:+, $RJ_TRAIN_EXTRA}}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 100}
distributed: {sharding: ${RJ_SHARDING:?}, nodes: "${RJ_NODES:?}", procs_per_node: 1}
restart: {max_restarts: ${RJ_RESTARTS:?}}
YAML
  echo "$CP_WORK/$1.yaml"
}

resume_reference() {
  "${TRAINER:?}" train --config "$(resume_job ref)" >"$CP_WORK/ref.log" 2>&1 ||
    { cat "$CP_WORK/ref.log"; exit 1; }
}

rank_pid() {
  local p
  for p in $(pgrep -f "ringmaster-trainer train --config $CP_WORK/.*/jobs/$1/gen-$2/job.yaml" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$3"; then
      echo "$p"
      return
    fi
  done
}

resumed_step() {
  sed -n 's/.*resumed from .* (step \([0-9]*\),.*/\1/p' "$CP_WORK"/*/jobs/"$1"/gen-"$2"/rank-0.log 2>/dev/null |
    head -1
}

check_resumed() {
  local job=$1 gen=$2 min=$3 k
  if ! wait_until "${4:-60}" "generation $gen to resume" \
    bash -c "grep -qs 'resumed from' $CP_WORK/*/jobs/$job/gen-$gen/rank-0.log"; then
    echo "FAIL generation $gen did not resume from a checkpoint"
    RJ_FAIL=1
    return
  fi
  k=$(resumed_step "$job" "$gen")
  if ((k >= min)); then
    echo "ok   generation $gen resumed from step $k (newest committed before the fault: $min)"
  else
    echo "FAIL generation $gen resumed from step $k, older than committed step $min"
    RJ_FAIL=1
  fi
}

compare_with_reference() {
  local py=${RINGMASTER_PYTHON:-python3} lib out
  lib=$(dirname "${BASH_SOURCE[0]}")
  if out=$("$py" "$lib/compare_losses.py" "$CP_WORK/out/metrics.jsonl" "$CP_WORK/ref/metrics.jsonl" \
    "$RJ_STEPS"); then
    echo "ok   losses vs uninterrupted run: $out"
  else
    echo "FAIL losses vs uninterrupted run: $out"
    RJ_FAIL=1
  fi
  if out=$("$py" "$lib/compare_weights.py" "$CP_WORK/out/final/model.safetensors" \
    "$CP_WORK/ref/final/model.safetensors" 5e-5 1e-4); then
    echo "ok   final weights vs uninterrupted run: $out"
  else
    echo "FAIL final weights vs uninterrupted run: $out"
    RJ_FAIL=1
  fi
}
