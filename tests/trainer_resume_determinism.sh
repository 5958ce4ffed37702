#!/usr/bin/env bash
# ctest-labels: integration
# Same seed → identical losses; a run resumed from a checkpoint continues with the identical
# loss sequence (its metrics after the checkpoint equal the uninterrupted run's); SIGTERM
# checkpoints and exits 143, and running again finishes the job with the same losses. Its 12
# steps end mid-epoch (25 steps an epoch): the final weights are evaluated, metrics.jsonl's last
# evaluation line is of step 12, the printed dev accuracy says so, and `predict` with the
# exported model scores the same accuracy on the dev set.
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

"$T" train --config "$(write_job "$work/a" 12)" >"$work/a.out" 2>&1
"$T" train --config "$(write_job "$work/b" 12)" >/dev/null 2>&1
[[ $(losses "$work/a" | wc -l) -eq 12 ]] || { echo "expected 12 steps in run a"; exit 1; }
diff <(losses "$work/a") <(losses "$work/b") || { echo "same seed gave different losses"; exit 1; }

# The final figures are the exported model's, at step 12.
last_eval=$(grep '"eval_accuracy"' "$work/a/metrics.jsonl" | tail -n 1 || true)
[[ $(grep -c '"eval_accuracy"' "$work/a/metrics.jsonl") -eq 1 ]] ||
  { echo "expected one evaluation line (the final weights'), got:"; cat "$work/a/metrics.jsonl"; exit 1; }
grep -q '"step":12[,}]' <<<"$last_eval" || { echo "last evaluation not of step 12: $last_eval"; exit 1; }
acc_jsonl=$(grep -o '"eval_accuracy":[^,}]*' <<<"$last_eval" | cut -d: -f2)
loss_jsonl=$(grep -o '"eval_loss":[^,}]*' <<<"$last_eval" | cut -d: -f2)
printed=$(grep '^dev accuracy' "$work/a.out") || { echo "no dev accuracy printed"; cat "$work/a.out"; exit 1; }
grep -q 'step 12, the exported model' <<<"$printed" || { echo "printed figure names no step: $printed"; exit 1; }
acc_printed=$(sed -n 's/^dev accuracy \([0-9.]*\),.*/\1/p' <<<"$printed")
# `predict` on final/: its accuracy, and its mean cross-entropy from the logits it prints (the
# accuracy alone could agree by chance; the loss pins the weights).
"$T" predict --model "$work/a/final" --input "$work/data/dev.tsv" --max-len 48 >"$work/a.pred"
read -r acc_predict loss_predict < <(paste <(tail -n +2 "$work/data/dev.tsv" | cut -f2) <(tail -n +2 "$work/a.pred") |
  awk -F'\t' '{ n++; ok += ($1 == $2); m = $3; for (i = 4; i <= NF; i++) if ($i > m) m = $i
                 s = 0; for (i = 3; i <= NF; i++) s += exp($i - m); loss += m + log(s) - $($1 + 3) }
               END { if (n != 100) exit 1; printf "%.6f %.7f\n", ok / n, loss / n }') ||
  { echo "predict did not give 100 rows"; exit 1; }
awk -v j="$acc_jsonl" -v p="$acc_predict" -v s="$acc_printed" -v lj="$loss_jsonl" -v lp="$loss_predict" \
  'function abs(x) { return x < 0 ? -x : x }
   BEGIN { exit !(abs(j - p) < 1e-9 && abs(s - j) < 1e-4 && abs(lj - lp) < 1e-5) }' ||
  { echo "final figures: metrics.jsonl accuracy $acc_jsonl loss $loss_jsonl, printed $acc_printed," \
      "predict on final/ accuracy $acc_predict loss $loss_predict"; exit 1; }
echo "final weights (step 12): dev accuracy $acc_jsonl, loss $loss_jsonl in metrics.jsonl;" \
  "printed $acc_printed; predict on final/ $acc_predict, loss $loss_predict"

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
