#!/usr/bin/env bash
# ctest-labels: integration
# What the trainer says while it runs (issue #32), through the real binary:
#  - train.log_every_steps as HF's logging_steps: off a terminal, a progress line at every
#    multiple of N steps and no others, its loss the mean of those N steps' losses;
#  - fractional epochs as HF logs them (step / steps per epoch, 2 decimals) in those lines and in
#    metrics.jsonl;
#  - SIGTERM: at once a line "finishing step N, then saving a checkpoint", and N is the step the
#    run stops and checkpoints at;
#  - predict --probabilities: the softmax of the logits predict prints, in the same columns.
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok   $*"; }
cd "$work" || exit 1

"$T" gen-data --out data --train 64 --dev 16 --seed 3 >/dev/null || { echo "FAIL: gen-data"; exit 1; }
write_job() {  # $1 = output dir, $2 = the train section's extra keys
  cat >"$1.yaml" <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3, $2}
output: {dir: $1, checkpoint_every_steps: 0}
YAML
}

# 64 rows / 16 = 4 steps an epoch, 2 epochs: lines at steps 3 and 6.
write_job a "epochs: 2, log_every_steps: 3"
"$T" train --config a.yaml >a.out 2>a.err || { echo "FAIL: train"; cat a.err; exit 1; }
lines=$(grep -o 'train step [0-9]*/8 .*' a.err)
steps=$(grep -o 'train step [0-9]*' <<<"$lines" | awk '{print $3}' | tr '\n' ' ')
[[ $steps == "3 6 " ]] && ok "progress lines at steps $steps" || bad "progress lines at steps '$steps', want '3 6 '"$'\n'"$lines"
losses=$(grep '"loss"' a/metrics.jsonl | grep -v eval_loss | grep -o '"loss":[^,}]*' | cut -d: -f2)
for at in 3 6; do
  want=$(awk -v at="$at" 'NR > at - 3 && NR <= at { s += $1 } END { printf "%.4f", s / 3 }' <<<"$losses")
  got=$(grep -o "train step $at/8 loss=[0-9.]*" <<<"$lines" | sed 's/.*loss=//')
  [[ $got == "$want" ]] && ok "step $at: loss $got = mean of steps $((at - 2))..$at" ||
    bad "step $at: loss '$got', want the mean of the last 3 steps' losses $want"
done
grep -q 'train step 3/8 .* epoch=0.75 ' <<<"$lines" && grep -q 'train step 6/8 .* epoch=1.50 ' <<<"$lines" &&
  ok "epoch=0.75 and 1.50 in the progress lines" || bad "no fractional epoch in: $lines"
epochs=$(grep -v eval_loss a/metrics.jsonl | grep -o '"epoch":[^,}]*' | cut -d: -f2 | tr '\n' ' ')
[[ $epochs == "0.25 0.5 0.75 1.0 1.25 1.5 1.75 2.0 " ]] && ok "metrics.jsonl epochs $epochs" ||
  bad "metrics.jsonl step epochs '$epochs', want 0.25 0.5 ... 2.0"

# predict --probabilities against predict's logits.
"$T" predict --model a/final --input data/dev.tsv --output logits.tsv || bad "predict"
"$T" predict --model a/final --input data/dev.tsv --probabilities --output probs.tsv || bad "predict --probabilities"
if [[ -f probs.tsv ]]; then
  [[ $(head -n 1 probs.tsv) == "$(head -n 1 logits.tsv)" ]] || bad "headers differ"
  # (awk's exit runs END: `err` carries the reason through it.)
  paste logits.tsv probs.tsv | awk -F'\t' 'NR == 1 { c = NF / 2 - 1; next }
    { if ($1 != $(c + 2)) { err = 1; exit } m = $2; for (i = 3; i <= c + 1; i++) if ($i > m) m = $i
      s = 0; for (i = 2; i <= c + 1; i++) s += exp($i - m)
      t = 0; for (i = 2; i <= c + 1; i++) { p = exp($i - m) / s; t += $(c + 1 + i)
        if (p - $(c + 1 + i) > 1e-6 || $(c + 1 + i) - p > 1e-6) { err = 2; exit } }
      if (t - 1 > 1e-5 || 1 - t > 1e-5) { err = 3; exit } n++ }
    END { if (err) exit err; if (n != 16) exit 4 }' && ok "--probabilities: the softmax of the logits, 16 rows, each summing to 1" ||
    bad "--probabilities disagree with softmax(logits) (1: labels, 2: a value, 3: sum, 4: rows)"
fi

# SIGTERM mid-run: the line at once, naming the step the checkpoint is then saved at.
write_job b "max_steps: 100000"
"$T" train --config b.yaml >/dev/null 2>b.err &
pid=$!
for _ in $(seq 1 3000); do  # bounded: until a few steps are logged
  [[ -f b/metrics.jsonl ]] && [[ $(wc -l <b/metrics.jsonl) -ge 3 ]] && break
  sleep 0.02
done
kill -TERM "$pid"
wait "$pid"; rc=$?; pid=
[[ $rc -eq 143 ]] || bad "SIGTERM exit code $rc, want 143"
said=$(grep -o 'finishing step [0-9]*, then saving a checkpoint' b.err | head -n 1)
stopped=$(grep -o 'stopped by signal at step [0-9]*' b.err)
if [[ -n $said && ${said//[^0-9]/} == "${stopped//[^0-9]/}" ]]; then
  ok "SIGTERM: '$said', then '$stopped'"
else
  bad "SIGTERM: said '$said', stopped '$stopped'"; sed 's/^/    /' b.err | tail -n 5
fi
# The line comes before the checkpoint is written.
first=$(grep -n -m1 'finishing step' b.err | cut -d: -f1)
saved=$(grep -n -m1 'stopped by signal' b.err | cut -d: -f1)
[[ -n $first && -n $saved && $first -lt $saved ]] || bad "the stop line is not before the checkpoint's"
exit $fail
