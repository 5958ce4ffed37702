#!/usr/bin/env bash
# ctest-labels: integration;serial
# A rank killed mid-run (SIGKILL: no goodbye) must not hang the others: every survivor exits
# non-zero within the collective timeout (plus the few seconds the diagnosis takes) with an
# error that names the lost rank. Run for full_shard (all-gathers, all-to-alls) and no_shard
# (Gloo ring all-reduce).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
trap 'kill -9 "${RANK_PIDS[@]}" 2>/dev/null || true; [[ ${KEEP:-0} == 1 ]] || rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 400 --dev 16 --seed 3 >/dev/null
export COLLECTIVE_TIMEOUT_S=15
fail=0
for sharding in full_shard no_shard; do
  cat >"$work/$sharding.yaml" <<YAML
name: rank-loss
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {max_steps: 100000, global_batch_size: 8, micro_batch_size: 2, seed: 1}
output: {dir: $sharding, checkpoint_every_steps: 0}
distributed: {sharding: $sharding}
YAML
  launch_ranks 4 1 "$work/$sharding.yaml" "$work/$sharding"
  # Wait (bounded) until training is under way, then kill rank 2.
  for _ in $(seq 1 600); do
    [[ -f $work/$sharding/metrics.jsonl ]] && [[ $(wc -l <"$work/$sharding/metrics.jsonl") -ge 5 ]] && break
    sleep 0.1
  done
  [[ $(wc -l <"$work/$sharding/metrics.jsonl") -ge 5 ]] || { echo "FAIL: $sharding never started"; exit 1; }
  start=$SECONDS
  kill -9 "${RANK_PIDS[2]}"
  for r in 0 1 3; do
    if wait "${RANK_PIDS[$r]}"; then
      echo "FAIL: $sharding: rank $r exited 0 after rank 2 was killed"; fail=1
    fi
  done
  took=$((SECONDS - start))
  echo "$sharding: survivors exited ${took}s after the kill"
  if ((took > COLLECTIVE_TIMEOUT_S + 10)); then
    echo "FAIL: $sharding: survivors took ${took}s (timeout ${COLLECTIVE_TIMEOUT_S}s)"; fail=1
  fi
  for r in 0 1 3; do
    if ! grep -q "lost rank 2 " "$work/$sharding-$r.log"; then
      echo "FAIL: $sharding: rank $r's error does not name rank 2:"; tail -3 "$work/$sharding-$r.log"; fail=1
    fi
  done
  grep -h "error" "$work/$sharding"-*.log | tail -3
done
exit $fail
