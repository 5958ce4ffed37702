#!/usr/bin/env bash
# ctest-labels: integration
# An over-long row in the training file (issue #32: "a 5 MB line is truncated without a word"):
# one warning naming its file and line, only the first such row, and training goes on (the row
# truncated to data.max_seq_len, as transformers' truncation=True does).
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0

"$T" gen-data --out data --train 32 --dev 8 --seed 3 >/dev/null || { echo "FAIL: gen-data"; exit 1; }
# Lines 5 and 9 of train.tsv (line 1 is the header) become 5 MB rows of 1,000,000 words.
{
  sed -n '1,4p' data/train.tsv
  yes good | head -n 1000000 | tr '\n' ' '; printf '\t1\n'
  sed -n '6,8p' data/train.tsv
  yes good | head -n 1000000 | tr '\n' ' '; printf '\t0\n'
  sed -n '10,$p' data/train.tsv
} >data/long.tsv
cat >job.yaml <<'YAML'
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/long.tsv, max_seq_len: 32}
train: {max_steps: 2, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
"$T" train --config job.yaml >/dev/null 2>err.txt || { echo "FAIL: train: $(tail -n 3 err.txt)"; exit 1; }
warnings=$(grep 'more than any data.max_seq_len' err.txt)
n=$(grep -c . <<<"$warnings")
if [[ $n -eq 1 ]] && grep -q 'long.tsv:5: a row of 5000000 bytes and 1000000 words' <<<"$warnings"; then
  echo "ok   one warning: ${warnings:0:160}"
else
  echo "FAIL: want one warning naming long.tsv:5, got $n:"; sed 's/^/    /' err.txt | cut -c1-200; fail=1
fi
exit $fail
