#!/usr/bin/env bash
# ctest-labels: integration;serial;gpu
# `ringmaster local --gpus` gives every agent a GPU inventory; a job with train.device: auto is
# planned onto those GPUs and each rank runs the CUDA engine (on the CPU under the CUDA emulator
# here; on a GPU machine the inventory must name its real GPUs): the plan's device
# (RINGMASTER_DEVICE=cuda), its GPU (CUDA_VISIBLE_DEVICES from the agent) and the precision the
# planner chose for the GPU's generation (bf16 for sm_90) reach the rank, and its loss curve equals
# a standalone trainer's given the same plan. Skips (77) without the CUDA engine or a device.
set -euo pipefail
T=${TRAINER:?}
B=${RINGMASTER_BINARY_DIR:?}
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 96 --dev 16 --seed 4 >/dev/null
job() {  # $1 = output dir name
  cat >"$work/$1.yaml" <<YAML
name: local-cuda
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: 6, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3,
        warmup_steps: 1, seed: 5, device: auto}
output: {dir: $1, checkpoint_every_steps: 0}
YAML
  echo "$work/$1.yaml"
}
# The reference: one trainer given the plan a GPU rank of sm_90 gets.
if ! RINGMASTER_DEVICE=cuda RINGMASTER_PRECISION=bf16 "$T" train --config "$(job ref)" \
  >"$work/ref.log" 2>&1; then
  if grep -qE "no usable CUDA device|no CUDA-capable device|train.device: cuda is not available" \
    "$work/ref.log"; then
    echo "SKIP: $(tail -1 "$work/ref.log")"
    exit 77
  fi
  cat "$work/ref.log"; exit 1
fi
export RINGMASTER_COLLECTIVE_TIMEOUT_S=120
if ! timeout 600 "$CLI" local "$(job cp)" --nodes 1 --procs-per-node 1 --trainer "$T" --keep \
  --gpus '1xNVIDIA H200:sm_90:141GiB' >"$work/local.out" 2>"$work/local.err"; then
  echo "FAIL: ringmaster local did not succeed"
  cat "$work/local.out" "$work/local.err"
  exit 1
fi
kept=$(sed -n 's/.*logs kept in \(.*\)$/\1/p' "$work/local.err" | head -1)
[[ -n $kept && -d $kept ]] || { cat "$work/local.err"; echo "FAIL: no kept logs"; exit 1; }
trap 'rm -rf "$work" "$kept"' EXIT
rank_log=$(ls "$kept"/*/jobs/*/gen-*/rank-0.log | head -1)
line=$(grep -o "train.device: cuda: the CUDA engine .*" "$rank_log" || true)
echo "rank 0: ${line:-no CUDA engine line}"
[[ $line == *"the CUDA engine (bf16)"* && $line == *"CUDA_VISIBLE_DEVICES=0)"* ]] ||
  { cat "$rank_log"; echo "FAIL: rank 0 did not run the CUDA engine in bf16 on GPU 0"; exit 1; }
losses() { grep -o '"loss":[^,}]*' "$1" | cut -d: -f2; }
[[ $(losses "$work/cp/metrics.jsonl" | wc -l) -eq 6 ]] || { cat "$work/cp/metrics.jsonl"; echo "FAIL: not 6 steps"; exit 1; }
if ! diff <(losses "$work/cp/metrics.jsonl") <(losses "$work/ref/metrics.jsonl") >/dev/null; then
  paste <(losses "$work/cp/metrics.jsonl") <(losses "$work/ref/metrics.jsonl")
  echo "FAIL: the rank's loss curve differs from the standalone trainer's with the same plan"; exit 1
fi
echo "ok   the local cluster's CUDA rank and a standalone CUDA trainer: the same 6 losses"
