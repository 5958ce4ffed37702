#!/usr/bin/env bash
# ctest-labels: integration;serial
# The control plane end to end on one machine: `ringmaster local` starts a coordinator and two
# agents (two CPU ranks each), submits a job and follows it to Succeeded; the four ranks the agents
# launched end with the same weights as one process on the same global batch (dropout off, so
# only the summation order differs; tolerance as in dist_equivalence.sh).
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
B=${RINGMASTER_BINARY_DIR:?}
here=$(cd "$(dirname "$0")" && pwd)
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 200 --dev 40 --seed 3 >/dev/null

job() {  # $1 = output dir name
  cat >"$work/$1.yaml" <<YAML
name: control-plane-local
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 1, max_steps: 10, global_batch_size: 24, micro_batch_size: 4, lr: 2.0e-3,
        warmup_steps: 2, seed: 11, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {sharding: full_shard}
YAML
  echo "$work/$1.yaml"
}

"$T" train --config "$(job ref)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }

export RINGMASTER_COLLECTIVE_TIMEOUT_S=120
if ! timeout 900 "$CLI" local "$(job cp)" --nodes 2 --procs-per-node 2 --trainer "$T" \
  >"$work/local.out" 2>"$work/local.err"; then
  echo "FAIL: ringmaster local did not succeed"
  cat "$work/local.out" "$work/local.err"
  for d in $(sed -n 's/.*logs kept in \(.*\)$/\1/p' "$work/local.err"); do
    tail -n 20 "$d"/*.log "$d"/*/jobs/*/gen-*/rank-*.log 2>/dev/null || true
  done
  exit 1
fi
cat "$work/local.out"
fail=0
grep -q "Succeeded  step 10/10" "$work/local.out" || { echo "FAIL: no final Succeeded line"; fail=1; }
grep -q "world 4" "$work/local.out" || { echo "FAIL: world size 4 never shown"; fail=1; }
[[ $(grep -c '"loss"' "$work/cp/metrics.jsonl") -eq 10 ]] || { echo "FAIL: not 10 steps"; fail=1; }
if out=$("$PY" "$here/lib/compare_weights.py" "$work/cp/final/model.safetensors" \
  "$work/ref/final/model.safetensors" 2e-6 1e-4); then
  echo "ok   4 ranks on 2 agents vs one process: $out"
else
  echo "FAIL 4 ranks on 2 agents vs one process: $out"; fail=1
fi
# Nothing is left running: the local cluster's processes are gone.
cluster_dir=$(sed -n 's/.*logs and work dirs in \(.*\))$/\1/p' "$work/local.err")
[[ -n $cluster_dir && ! -e $cluster_dir ]] || { echo "FAIL: $cluster_dir left behind"; fail=1; }
if [[ -n $cluster_dir ]] && pgrep -f "$cluster_dir" >/dev/null; then
  echo "FAIL: agents still running after ringmaster local returned"; fail=1
fi
exit $fail
