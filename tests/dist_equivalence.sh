#!/usr/bin/env bash
# ctest-labels: integration;serial
# Data parallelism without compression changes nothing but the summation order: 1, 2 and 4
# ranks on the same global batch end with the same weights as one process, for every sharding
# strategy (hybrid_shard as 2 nodes), and for no_shard with gradient buckets. Dropout is off so
# every world size draws the same masks.
# Tolerance: |diff| <= 2e-6 + 1e-4·|w| after 10 AdamW steps (an epoch of 9, its last global batch short, then one more) in fp32 (measured max 1.8e-7).
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 200 --dev 64 --seed 3 >/dev/null

job() {  # $1 = output dir name, $2 = sharding
  cat >"$work/$1.yaml" <<YAML
name: equivalence
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 1, max_steps: 10, global_batch_size: 24, micro_batch_size: 4, lr: 2.0e-3,
        warmup_steps: 2, seed: 11, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {sharding: $2}
YAML
  echo "$work/$1.yaml"
}

same_as_ref() {  # $1 = run name, $2 = label: final weights against the one-process run
  local out
  if out=$("$PY" "$here/lib/compare_weights.py" "$work/$1/final/model.safetensors" \
    "$work/ref/final/model.safetensors" 2e-6 1e-4); then
    echo "ok   $2: $out"
  else
    echo "FAIL $2: $out"; fail=1
  fi
}

"$T" train --config "$(job ref no_shard)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
fail=0
for sharding in no_shard shard_grad_op full_shard hybrid_shard; do
  for world in 1 2 4; do
    nodes=1
    [[ $sharding == hybrid_shard && $world -gt 1 ]] && nodes=2
    name="${sharding}_w${world}"
    launch_ranks "$world" "$nodes" "$(job "$name" "$sharding")" "$work/$name"
    if ! wait_ranks; then
      echo "FAIL: $name: a rank failed"; tail -5 "$work/$name"-*.log; fail=1; continue
    fi
    same_as_ref "$name" "$name"
  done
done
# Uneven shares (mixed GPU generations: the planner gives faster ranks more of each global
# batch) change nothing either.
for spec in "2 1,3" "4 1,2,3,2"; do
  read -r world weights <<<"$spec"
  name="weighted_w${world}"
  launch_ranks "$world" 1 "$(job "$name" full_shard)" "$work/$name" RINGMASTER_RANK_WEIGHTS="$weights"
  wait_ranks || { echo "FAIL: $name: a rank failed"; tail -5 "$work/$name"-*.log; fail=1; continue; }
  same_as_ref "$name" "$name (weights $weights)"
done
# Gradient buckets (no_shard's bucket_cap_mb: 0.05 MiB puts layer 0, layer 1 and the head in
# one all-reduce, the embeddings in another) change only the summation order.
for world in 2 4; do
  name="buckets_w${world}"
  sed -e "s/^distributed: .*/distributed: {sharding: no_shard, bucket_cap_mb: 0.05}/" \
    "$(job "$name" no_shard)" >"$work/$name.bkt.yaml"
  launch_ranks "$world" 1 "$work/$name.bkt.yaml" "$work/$name"
  wait_ranks || { echo "FAIL: $name: a rank failed"; tail -5 "$work/$name"-*.log; fail=1; continue; }
  same_as_ref "$name" "$name (bucket_cap_mb 0.05)"
done
# Zero-block skipping is lossless: with a vocabulary ten times what the data uses (as with
# bert-base-uncased's table on a fine-tuning task), all-reduces with and without skipping end
# with the same weights and skipping sends under half the bytes. fp16 keeps no residual, so its
# weights are bit-identical; uncompressed, only the order of summation differs (rank order
# instead of the backend's ring), so the equivalence tolerance applies.
for comp in fp16 none; do
  for skip in true false; do
    name="skip_${comp}_${skip}"
    sed -e "s/hidden_dropout_prob: 0.0,/hidden_dropout_prob: 0.0, vocab_size: 4000,/" \
      -e "s/^distributed: .*/distributed: {sharding: no_shard, compression: $comp, skip_zero_blocks: $skip}/" \
      "$(job "$name" no_shard)" >"$work/$name.vocab.yaml"
    launch_ranks 2 1 "$work/$name.vocab.yaml" "$work/$name"
    wait_ranks || { echo "FAIL: $name: a rank failed"; tail -5 "$work/$name"-*.log; fail=1; }
  done
  tol="2e-6 1e-4"
  [[ $comp == fp16 ]] && tol="0 0"
  # shellcheck disable=SC2086
  if out=$("$PY" "$here/lib/compare_weights.py" "$work/skip_${comp}_true/final/model.safetensors" \
    "$work/skip_${comp}_false/final/model.safetensors" $tol); then
    echo "ok   $comp: skip_zero_blocks true = false (atol rtol $tol): $out"
  else
    echo "FAIL $comp: skip_zero_blocks changed the weights: $out"; fail=1
  fi
  if out=$("$PY" - "$work/skip_${comp}_true/ranks/rank-0.json" \
    "$work/skip_${comp}_false/ranks/rank-0.json" <<'PY'
import json, sys
on, off = (json.load(open(f))["reduce_wire_bytes"] for f in sys.argv[1:3])
print(f"reduce_wire_bytes {on} with skipping, {off} without ({off / max(on, 1):.2f}x)")
sys.exit(0 if 0 < on < off / 2 else 1)
PY
  ); then
    echo "ok   $comp: $out"
  else
    echo "FAIL $comp: $out"; fail=1
  fi
done
# Each rank tokenises only its share of the rows it trains on (10 steps: the 200 rows of epoch
# 1, then 24 more), plus the few micro-batches its prefetcher built past the last step; never
# the whole file.
if out=$("$PY" - "$work/no_shard_w4/ranks" <<'PY'
import glob, json, sys
stats = [json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/rank-*.json"))]
enc = [s["encoded_train_rows"] for s in stats]
rows = stats[0]["train_rows"]
ok = len(stats) == 4 and sum(enc) >= 224 and all(e <= rows // 2 for e in enc)
print(f"encoded rows per rank {enc} of {rows}")
sys.exit(0 if ok else 1)
PY
); then
  echo "ok   no_shard_w4: $out"
else
  echo "FAIL no_shard_w4: $out"; fail=1
fi
exit $fail
