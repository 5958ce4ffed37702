#!/usr/bin/env bash
# ctest-labels: integration;serial
# Sharded checkpoints reshard on load: a full_shard run checkpointed at 2 ranks resumes at 4
# ranks (full_shard), at 1 rank (no_shard, a single process) and at 3 ranks (shard_grad_op) and
# continues the same loss curve (every later step within 1e-4 relative: only the summation
# order differs). Also: the checkpoint of a 2-rank run has one shard file per rank and a
# manifest, and a rank's damaged shard makes every rank skip that checkpoint together.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/ranks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 300 --dev 40 --seed 5 >/dev/null

job() {  # $1 = output dir name, $2 = sharding
  cat >"$work/$1.yaml" <<YAML
name: reshard
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 40}
train: {max_steps: 12, global_batch_size: 12, micro_batch_size: 3, lr: 1.0e-3, seed: 9}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 5}
distributed: {sharding: $2}
YAML
  echo "$work/$1.yaml"
}
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl" | cut -d: -f2; }
same_curve() {  # $1 $2 = run dirs: same number of steps, each loss within 1e-4 relative
  paste <(losses "$1") <(losses "$2") | awk -v a="$1" -v b="$2" '
    { n++; d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2;
      if (d > 1e-4 * m) { printf "step %d: %s vs %s\n", NR, $1, $2; bad = 1 } }
    END { if (n != 12) { print "expected 12 steps, got " n; bad = 1 } exit bad }'
}

launch_ranks 2 1 "$(job a full_shard)" "$work/a"
wait_ranks || { echo "FAIL: 2-rank run failed"; tail -3 "$work"/a-*.log; exit 1; }
ckpt=$work/a/checkpoints/step-00000004
for f in manifest.json shard-00000-of-00002.safetensors shard-00001-of-00002.safetensors; do
  [[ -f $ckpt/$f ]] || { echo "FAIL: $ckpt/$f missing"; ls "$ckpt"; exit 1; }
done

fail=0
resume_from_step4() {  # $1 = new run name; keeps only a's step-4 checkpoint
  cp -r "$work/a" "$work/$1"
  rm -rf "$work/$1/final" "$work/$1/ranks" "$work/$1"/checkpoints/step-0000000{8,12} \
    "$work/$1/checkpoints/step-00000012"
}
for spec in "b 4 full_shard" "c 1 no_shard" "d 3 shard_grad_op"; do
  read -r name world sharding <<<"$spec"
  resume_from_step4 "$name"
  if [[ $world == 1 ]]; then
    "$T" train --config "$(job "$name" "$sharding")" >"$work/$name-0.log" 2>&1 || fail=1
  else
    launch_ranks "$world" 1 "$(job "$name" "$sharding")" "$work/$name"
    wait_ranks || fail=1
  fi
  if ! grep -q "resumed from .*step-00000004 .*written by 2 rank(s), now $world" "$work/$name-0.log"; then
    echo "FAIL: $name did not resume from step 4 at $world rank(s)"; tail -3 "$work/$name-0.log"; fail=1
    continue
  fi
  if same_curve "$work/$name" "$work/a"; then
    echo "ok   resumed at $world rank(s) ($sharding): same loss curve"
  else
    echo "FAIL: resumed at $world rank(s) ($sharding): loss curve differs"; fail=1
  fi
done

# One damaged shard: every rank skips step 8 together and resumes from step 4.
cp -r "$work/a" "$work/e"
rm -rf "$work/e/final" "$work/e/ranks" "$work/e/checkpoints/step-00000012"
printf 'garbage' | dd of="$work/e/checkpoints/step-00000008/shard-00001-of-00002.safetensors" \
  bs=1 seek=200 conv=notrunc 2>/dev/null
launch_ranks 2 1 "$(job e full_shard)" "$work/e"
wait_ranks || { echo "FAIL: run e failed"; tail -3 "$work"/e-*.log; exit 1; }
grep -q "skipping damaged checkpoint" "$work/e-0.log" || { echo "FAIL: damage not reported"; fail=1; }
grep -q "resumed from .*step-00000004" "$work/e-0.log" || { echo "FAIL: e did not fall back to step 4"; fail=1; }
same_curve "$work/e" "$work/a" || { echo "FAIL: run e diverged"; fail=1; }
exit $fail
