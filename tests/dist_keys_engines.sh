#!/usr/bin/env bash
# ctest-labels: integration;gpu;serial
# Every engine-side distributed.* key acts alike on the CPU engine and the CUDA engine (one
# data-parallel plan, trainer/parallel/sharding_plan.h): two CPU ranks (Gloo) and two CUDA ranks
# (NCCL; on a machine without GPUs the CUDA emulator and its NCCL stand-in) run the same job and
# must give the same per-step losses (relative 1e-4: fp32, only the summation order differs) and
# send the same reduction bytes, raw and on the wire (rank 0's report), for: sharding (all four;
# hybrid_shard as 2 nodes), compression (none, fp16, bf16, int8, powersgd), skip_zero_blocks
# (on and off), bucket_cap_mb, powersgd_rank and powersgd_start_step. The wire bytes show
# zero-block skipping: the embeddings' gradient is mostly zero rows, so with skip_zero_blocks on
# an uncompressed all-reduce sends fewer bytes than fp32 would, and with it off exactly as many.
# Not here: compression auto (the CPU ranks measure their links; CUDA ranks stay uncompressed,
# docs/job-reference.md), backend (gloo cannot carry device buffers), nodes and procs_per_node
# (placement, given here by the torchrun environment). Skips (77) without the CUDA engine or NCCL.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
trap 'kill "${RANK_PIDS[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 64 --dev 8 --seed 7 >/dev/null
steps=4
job() {  # job NAME DEVICE DISTRIBUTED_KEYS
  cat >"$work/$1.yaml" <<YAML
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 32, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 24}
train: {max_steps: $steps, global_batch_size: 8, micro_batch_size: 2, lr: 2.0e-3, warmup_steps: 1,
        seed: 3, device: $2, precision: fp32, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {backend: auto, $3}
YAML
  echo "$work/$1.yaml"
}
losses() { grep -o '"loss":[^,}]*' "$work/$1/metrics.jsonl" | cut -d: -f2; }
bytes() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["reduce_raw_bytes"], r["reduce_wire_bytes"])' "$work/$1/ranks/rank-0.json"; }
run() {  # run NAME DEVICE NODES KEYS
  launch_ranks 2 "$3" "$(job "$1" "$2" "$4")" "$work/$1"
  if ! wait_ranks; then
    if [[ $2 == cuda ]] && grep -qE "not available in this build|no NCCL|no usable CUDA device|no CUDA-capable device" "$work/$1"-*.log; then
      echo "SKIP: $(grep -hE "not available|no NCCL|no usable|no CUDA-capable" "$work/$1"-*.log | head -1)"
      exit 77
    fi
    tail -5 "$work/$1"-*.log
    echo "FAIL: $1 ($2, $4): a rank failed"
    exit 1
  fi
}

fail=0
check() {  # check NAME NODES KEYS [fewer|same]: the wire bytes against the raw ones
  local name=$1 nodes=$2 keys=$3 wire=${4:-}
  run "${name}_cpu" cpu "$nodes" "$keys"
  run "${name}_gpu" cuda "$nodes" "$keys"
  grep -q "the CUDA engine" "$work/${name}_gpu-0.log" ||
    { echo "FAIL: $name: the cuda run did not use the CUDA engine"; exit 1; }
  if ! paste <(losses "${name}_cpu") <(losses "${name}_gpu") | awk -v name="$name" -v n="$steps" '
    { k++; d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; if (d / m > worst) worst = d / m }
    END { printf "%-10s losses: max relative difference %.2e over %d steps\n", name, worst, k
          exit !(k == n && worst < 1e-4) }'; then
    echo "FAIL: $name ($keys): the engines' losses differ"; fail=1
  fi
  local c g
  c=$(bytes "${name}_cpu")
  g=$(bytes "${name}_gpu")
  echo "$name bytes (raw wire): cpu $c, cuda $g"
  [[ $c == "$g" ]] || { echo "FAIL: $name ($keys): the engines sent different bytes"; fail=1; }
  read -r raw sent <<<"$g"
  case $wire in
    fewer) ((sent < raw)) || { echo "FAIL: $name: no zero blocks skipped ($sent of $raw)"; fail=1; } ;;
    same) ((sent == raw)) || { echo "FAIL: $name: $sent bytes sent, fp32 takes $raw"; fail=1; } ;;
  esac
}

check plainskip 1 "sharding: no_shard, compression: none" fewer
check plainfull 1 "sharding: no_shard, compression: none, skip_zero_blocks: false" same
check int8bkt 1 "sharding: no_shard, compression: int8, bucket_cap_mb: 0.02, skip_zero_blocks: false"
check fp16sgo 1 "sharding: shard_grad_op, compression: fp16"
check bf16full 1 "sharding: full_shard, compression: bf16"
check psgdhyb 2 "sharding: hybrid_shard, compression: powersgd, powersgd_rank: 2, powersgd_start_step: 1"
exit "$fail"
