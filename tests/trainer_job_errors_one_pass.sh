#!/usr/bin/env bash
# ctest-labels: integration
# A job file's mistakes in one run (issue #32): an unknown key, a misspelt setting and an
# out-of-range value are all reported by the same `train --config`, each as file:line:col, with
# a non-zero exit (3: a wrong job) and nothing trained. Before this, the values were reported
# only on the run after the key was fixed.
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

cat >"$work/bad.yaml" <<'YAML'
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}
  vocab: vocab.txt
data: {train: train.tsv, max_seq_len: 32}
train:
  epochs: 1
  lr_schedule: cosin
  eval_steps: -5
  warmup_ratioo: 0.1
  micro_batch_size: lots
output: {dir: out}
YAML
"$T" train --config "$work/bad.yaml" >"$work/out.txt" 2>"$work/err.txt"
rc=$?
[[ $rc -eq 3 ]] || { echo "FAIL: exit $rc, want 3"; fail=1; }
for want in \
  "bad.yaml:7:16: train.lr_schedule: 'cosin' is not one of" \
  "bad.yaml:8:15: train.eval_steps: must be >= 0, got -5" \
  "bad.yaml:9:3: unknown key 'train.warmup_ratioo'; did you mean 'train.warmup_ratio'?" \
  "bad.yaml:10:21: train.micro_batch_size: expected an integer, got 'lots'"; do
  if grep -qF -- "$want" "$work/err.txt"; then
    echo "ok   $want"
  else
    echo "FAIL missing: $want"; fail=1
  fi
done
# A value that could not be read is reported once, not checked again against its default.
n=$(grep -c 'micro_batch_size' "$work/err.txt")
[[ $n -eq 1 ]] || { echo "FAIL: micro_batch_size reported $n times"; fail=1; }
[[ -e $work/out ]] && { echo "FAIL: output directory created for a bad job"; fail=1; }
if [[ $fail -ne 0 ]]; then
  echo "stderr was:"; sed 's/^/    /' "$work/err.txt"
fi
exit $fail
