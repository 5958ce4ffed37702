#!/usr/bin/env bash
# ctest-labels: integration;gpu;serial
# train.gradient_checkpointing through `ringmaster-trainer train`: the same small job with dropout
# on, with and without the switch, gives the same losses and gradient norms at every step (the
# values metrics.jsonl prints, compared as text: the runs are equal bit for bit) on the CPU engine
# and on the CUDA engine (a GPU, or the CUDA emulator); the run's job.yaml records the switch; the
# CUDA run's rank report shows a smaller activation arena with it, and the CPU run's log that its
# model took the switch. Two ranks under full_shard (parameters gathered and gradients reduced
# unit by unit while backward reruns each layer) give the same figures both ways too, on Gloo CPU
# ranks and on CUDA ranks over NCCL (the emulator's stand-in here). The CUDA half skips (its lines
# say so) when the binary has no CUDA engine or no CUDA device; the CPU half always runs.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
RANK_PIDS=()
trap 'kill "${RANK_PIDS[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 96 --dev 16 --seed 7 >/dev/null
job() {  # job NAME DEVICE CHECKPOINTING [SHARDING]
  cat >"$work/$1.yaml" <<YAML
model:
  config: {hidden_size: 32, num_hidden_layers: 3, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.1, attention_probs_dropout_prob: 0.1}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32, shuffle: true}
train: {max_steps: 6, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3, warmup_steps: 2,
        seed: 3, device: $2, precision: fp32, gradient_checkpointing: $3}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {sharding: ${4:-no_shard}}
YAML
}
# Each step's "loss" and "grad_norm" as metrics.jsonl writes them.
figures() { grep -o '"\(loss\|grad_norm\)":[^,}]*' "$work/$1/metrics.jsonl"; }
compare() {  # compare PLAIN CHECKPOINTED
  local n
  n=$(figures "$1" | grep -c '"loss"' || true)
  [[ $n == 6 ]] || { echo "FAIL: $1 logged $n steps, expected 6"; exit 1; }
  if ! diff <(figures "$1") <(figures "$2") >"$work/diff.txt"; then
    cat "$work/diff.txt"
    echo "FAIL: $2's losses or gradient norms differ from $1's"
    exit 1
  fi
  grep -q "gradient_checkpointing: true" "$work/$2/job.yaml" ||
    { echo "FAIL: $2/job.yaml does not record gradient_checkpointing: true"; exit 1; }
  grep -q "gradient_checkpointing: false" "$work/$1/job.yaml" ||
    { echo "FAIL: $1/job.yaml does not record gradient_checkpointing: false"; exit 1; }
  echo "ok   $1 vs $2: the same $n losses and gradient norms (first $(figures "$2" | grep '"loss"' | head -1))"
}
for name in cpu_plain:false cpu_ckpt:true; do job "${name%%:*}" cpu "${name#*:}"; done
for name in cpu_plain cpu_ckpt; do
  "$T" train --config "$work/$name.yaml" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
done
compare cpu_plain cpu_ckpt
two_ranks() {  # two_ranks NAME DEVICE CHECKPOINTING: a 2-rank full_shard run
  job "$1" "$2" "$3" full_shard
  launch_ranks 2 1 "$work/$1.yaml" "$work/$1"
  wait_ranks || { tail -5 "$work/$1"-*.log; echo "FAIL: the 2-rank run $1 failed"; exit 1; }
}
two_ranks cpu2_plain cpu false
two_ranks cpu2_ckpt cpu true
compare cpu2_plain cpu2_ckpt
# The switch reached the CPU model (it says so), and only when set.
grep -q "gradient checkpointing: backward recomputes" "$work/cpu_ckpt.log" ||
  { cat "$work/cpu_ckpt.log"; echo "FAIL: the CPU model did not take gradient checkpointing"; exit 1; }
! grep -q "gradient checkpointing" "$work/cpu_plain.log" ||
  { echo "FAIL: gradient checkpointing logged without the key"; exit 1; }

job cuda_plain cuda false
job cuda_ckpt cuda true
if ! "$T" train --config "$work/cuda_plain.yaml" >"$work/cuda_plain.log" 2>&1; then
  if grep -qE "train.device: cuda is not available in this build|no usable CUDA device|no CUDA-capable device" \
    "$work/cuda_plain.log"; then
    echo "skip the CUDA engine: $(tail -1 "$work/cuda_plain.log")"
    exit 0
  fi
  cat "$work/cuda_plain.log"
  exit 1
fi
"$T" train --config "$work/cuda_ckpt.yaml" >"$work/cuda_ckpt.log" 2>&1 || { cat "$work/cuda_ckpt.log"; exit 1; }
grep -q "the CUDA engine" "$work/cuda_ckpt.log" || { cat "$work/cuda_ckpt.log"; echo "FAIL: not the CUDA engine"; exit 1; }
compare cuda_plain cuda_ckpt
python3 - "$work/cuda_plain/ranks/rank-0.json" "$work/cuda_ckpt/ranks/rank-0.json" <<'PY' || exit 1
import json, sys
plain, ckpt = (json.load(open(p))["gpu"]["arena_bytes"] for p in sys.argv[1:])
print("ok   CUDA activation arena: %d bytes without, %d with gradient checkpointing" % (plain, ckpt))
if not 0 < ckpt < plain:
    sys.exit("FAIL: the arena did not shrink with gradient checkpointing")
PY
job cuda2_plain cuda false full_shard
launch_ranks 2 1 "$work/cuda2_plain.yaml" "$work/cuda2_plain"
if ! wait_ranks; then
  # A build without NCCL (the CUDA stand-in's or a real one) cannot run several CUDA ranks.
  if grep -qE "no NCCL|not available in this build" "$work"/cuda2_plain-*.log; then
    echo "skip 2 CUDA ranks: $(grep -hE "no NCCL|not available" "$work"/cuda2_plain-*.log | head -1)"
    exit 0
  fi
  tail -5 "$work"/cuda2_plain-*.log
  echo "FAIL: the 2-rank CUDA run cuda2_plain failed"
  exit 1
fi
two_ranks cuda2_ckpt cuda true
compare cuda2_plain cuda2_ckpt
