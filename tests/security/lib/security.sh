# shellcheck shell=bash
# Shared by the attack tests in tests/security (sourced; it sources tests/lib/cluster.sh; kept in
# a subfolder so that the *.sh glob of tests/CMakeLists.txt does not take it for a test).
#   security_cluster DIR  a test's control plane in DIR (a new temporary directory): on exit the
#                    cluster is stopped and DIR removed; cluster_init DIR; and fail MSG (prints
#                    "FAIL: MSG" and the cluster's logs, exits 1)
#   security_rogue   sets ROGUE to the hostile client (tests/security/rogue_agent.cc); skips
#                    (exit 77) when it is not built. $ROGUE_AGENT overrides the path.
#   tiny_job DIR     writes DIR/job.yaml (4 steps, 1 node) and its data under DIR/data
#   checkpoint_jobs DIR  writes DIR/job4.yaml and DIR/job6.yaml (the trainer alone: 4 and 6
#                    steps of one batch of 8, a checkpoint every 2 steps, output.dir out) and
#                    their data under DIR/data
# shellcheck source=tests/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/cluster.sh"

security_cluster() {
  trap 'cluster_stop; rm -rf "$CP_WORK"' EXIT
  cluster_init "$1"
  fail() { echo "FAIL: $*"; cluster_logs; exit 1; }
}

security_rogue() {
  ROGUE=${ROGUE_AGENT:-${RINGMASTER_BINARY_DIR:?}/tests/security/rogue_agent}
  [[ -x $ROGUE ]] || { echo "SKIP: $ROGUE not built"; exit 77; }
}

tiny_job() {
  cat >"$1/job.yaml" <<YAML
name: security-tiny
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32, shuffle: true}
train: {epochs: 1, max_steps: 4, global_batch_size: 8, micro_batch_size: 4, lr: 2.0e-3,
        warmup_steps: 1, seed: 5, max_grad_norm: 0.5}
output: {dir: out, checkpoint_every_steps: 0}
distributed: {sharding: full_shard, nodes: 1, procs_per_node: 1}
YAML
  "${TRAINER:?}" gen-data --out "$1/data" --train 40 --dev 8 --seed 5 >/dev/null
}

checkpoint_jobs() {
  local steps
  "${TRAINER:?}" gen-data --out "$1/data" --train 64 --dev 8 --seed 3 >/dev/null
  for steps in 4 6; do
    cat >"$1/job$steps.yaml" <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: $steps, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3}
output: {dir: out, checkpoint_every_steps: 2}
YAML
  done
}

# checkpoint_jobs in DIR, then job4.yaml trained to its end from the current directory (which
# must be DIR): checkpoints at steps 2 and 4 under out/checkpoints/; train1.log is its log. A
# failed run ends the test (exit 1) with the log.
checkpointed_run() {
  checkpoint_jobs "$1"
  OMP_NUM_THREADS=1 "${TRAINER:?}" train --config job4.yaml >train1.log 2>&1 ||
    { cat train1.log; echo "FAIL: the first run failed"; exit 1; }
}
