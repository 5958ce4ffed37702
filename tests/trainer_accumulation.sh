#!/usr/bin/env bash
# ctest-labels: integration
# Gradient accumulation is exact: the same global batch as 1 x 16, 4 x 4 or 2 x 8 micro-batches
# (dropout off) gives the same loss curve, up to fp32 summation order.
set -euo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 200 --dev 40 --seed 11 >/dev/null
for micro in 16 4 8; do
  cat >"$work/m$micro.yaml" <<YAML
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 48, shuffle: false}
train: {epochs: 1, max_steps: 10, global_batch_size: 16, micro_batch_size: $micro, lr: 1.0e-3,
        warmup_steps: 2, seed: 3}
output: {dir: out$micro, checkpoint_every_steps: 0}
YAML
  "$T" train --config "$work/m$micro.yaml" >/dev/null 2>&1
done
losses() { grep -o '"loss":[^,}]*' "$work/out$1/metrics.jsonl" | cut -d: -f2; }
for micro in 4 8; do
  paste <(losses 16) <(losses "$micro") | awk -v m="$micro" '
    { n++; d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1);
      if (r > worst) worst = r }
    END { if (n != 10) { print "expected 10 steps, got " n; exit 1 }
          printf "micro %d: max relative loss difference %.2e over %d steps\n", m, worst, n
          exit !(worst < 1e-4) }'
done
# And the curve really moves (the comparison above is not between constants).
first=$(losses 16 | head -1); last=$(losses 16 | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != b) }'
