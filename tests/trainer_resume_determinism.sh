#!/usr/bin/env bash
# ctest-labels: integration
# Same seed → identical losses; a run resumed from a checkpoint continues with the identical
# loss sequence (its metrics after the checkpoint equal the uninterrupted run's); SIGTERM
# checkpoints and exits 143, and running again finishes the job with the same losses.
set -euo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 400 --dev 100 --seed 7

write_job() {  # $1 = output dir, $2 = max_steps
  cat >"$work/job_$(basename "$1").yaml" <<YAML
name: resume-test
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.1, attention_probs_dropout_prob: 0.1}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 1, max_steps: $2, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3,
        warmup_ratio: 0.1, seed: 5}
output: {dir: $(basename "$1"), checkpoint_every_steps: 4, keep_checkpoints: 10}
YAML
  echo "$work/job_$(basename "$1").yaml"
}
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl"; }

"$T" train --config "$(write_job "$work/a" 12)" >/dev/null 2>&1
"$T" train --config "$(write_job "$work/b" 12)" >/dev/null 2>&1
[[ $(losses "$work/a" | wc -l) -eq 12 ]] || { echo "expected 12 steps in run a"; exit 1; }
diff <(losses "$work/a") <(losses "$work/b") || { echo "same seed gave different losses"; exit 1; }

# Resume: keep only the step-4 checkpoint of a copy, run again, compare steps 5..12.
cp -r "$work/a" "$work/c"
rm -rf "$work/c/final" "$work/c/checkpoints/step-00000008" "$work/c/checkpoints/step-00000012"
sed -i 's/^output: {dir: a,/output: {dir: c,/' "$(write_job "$work/c" 12)"
"$T" train --config "$work/job_c.yaml" 2>"$work/c.log" >/dev/null
grep -q "resumed from .*step-00000004" "$work/c.log" || { echo "run c did not resume"; cat "$work/c.log"; exit 1; }
diff <(losses "$work/a") <(losses "$work/c") || { echo "resumed run diverged"; exit 1; }
cmp "$work/a/final/model.safetensors" "$work/c/final/model.safetensors" ||
  { echo "resumed run exported different weights"; exit 1; }

# A damaged newest checkpoint: resume falls back to the one before it, same losses.
cp -r "$work/a" "$work/f"
rm -rf "$work/f/final" "$work/f/checkpoints/step-00000012"
head -c 100 "$work/a/checkpoints/step-00000008/shard-00000-of-00001.safetensors" >"$work/f/checkpoints/step-00000008/shard-00000-of-00001.safetensors"
write_job "$work/f" 12 >/dev/null
"$T" train --config "$work/job_f.yaml" 2>"$work/f.log" >/dev/null
grep -q "skipping damaged checkpoint.*step-00000008" "$work/f.log" || { echo "damaged checkpoint not reported"; cat "$work/f.log"; exit 1; }
grep -q "resumed from .*step-00000004" "$work/f.log" || { echo "run f did not fall back to step 4"; exit 1; }
diff <(losses "$work/a") <(losses "$work/f") || { echo "run resumed past a damaged checkpoint diverged"; exit 1; }

# SIGTERM mid-run: a checkpoint, exit 143; the rerun completes with the same losses.
job_d=$(write_job "$work/d" 300)
job_e=$(write_job "$work/e" 300)
"$T" train --config "$job_e" >/dev/null 2>&1
"$T" train --config "$job_d" >/dev/null 2>"$work/d.log" &
pid=$!
for _ in $(seq 1 3000); do  # wait (bounded) until a few steps are logged
  [[ -f $work/d/metrics.jsonl ]] && [[ $(wc -l <"$work/d/metrics.jsonl") -ge 3 ]] && break
  sleep 0.02
done
kill -TERM "$pid"
set +e; wait "$pid"; rc=$?; set -e
# 300 steps give the signal ample time to land mid-run; a run that finished first checked nothing.
[[ $rc -eq 143 ]] || { echo "SIGTERM exit code $rc, expected 143"; cat "$work/d.log"; exit 1; }
grep -q "checkpoint saved" "$work/d.log" || { echo "no checkpoint on SIGTERM"; exit 1; }
"$T" train --config "$job_d" >/dev/null 2>&1
diff <(losses "$work/e") <(losses "$work/d") || { echo "run interrupted by SIGTERM diverged"; exit 1; }
echo "ok: determinism, resume and SIGTERM checkpointing"
