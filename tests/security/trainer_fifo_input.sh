#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 9: an input file that is not a regular file (a FIFO nobody writes, a device)
# must not block ringmaster-trainer forever. Each of the job file, the vocab, the training and
# the eval data, given as a FIFO, and the vocab given as /dev/zero, is refused within the time
# limit: exit 3 (a bad job, not worth a restart) with an error naming the file and what it is.
# Before the fix, open() on the FIFO waited for a writer and the run hit the timeout.
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cd "$work" || exit 1

"$T" gen-data --out "$work/data" --train 32 --dev 8 --seed 3 >/dev/null
mkfifo "$work/fifo"
job() {  # VOCAB TRAIN EVAL: a job file using them
  cat <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: $1
data: {train: $2, eval: $3, max_seq_len: 32}
train: {epochs: 1, max_steps: 2, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
}
job data/vocab.txt data/train.tsv data/dev.tsv >"$work/good.yaml"
job "$work/fifo" data/train.tsv data/dev.tsv >"$work/vocab_fifo.yaml"
job /dev/zero data/train.tsv data/dev.tsv >"$work/vocab_dev.yaml"
job data/vocab.txt "$work/fifo" data/dev.tsv >"$work/train_fifo.yaml"
job data/vocab.txt data/train.tsv "$work/fifo" >"$work/eval_fifo.yaml"

# refused NAME PATTERN ARGS...: exit 3 within 20 s, stderr matching PATTERN.
refused() {
  local name=$1 pattern=$2
  shift 2
  timeout 20 "$T" "$@" >"$work/stdout" 2>"$work/err"
  local rc=$?
  if ((rc == 124)); then
    echo "FAIL $name: still blocked after 20 s"
    fail=1
  elif ((rc != 3)) || ! grep -qE -- "$pattern" "$work/err"; then
    echo "FAIL $name: rc=$rc, stderr:"
    sed 's/^/    /' "$work/err"
    fail=1
  else
    echo "ok   $name: $(grep -v ' INFO ' "$work/err" | head -c 200)"
  fi
}
refused "job file as a FIFO" "$work/fifo: is a FIFO, expected a regular file" train --config "$work/fifo"
refused "vocab as a FIFO" "$work/fifo: is a FIFO, expected a regular file" train --config "$work/vocab_fifo.yaml"
refused "vocab as a device" "/dev/zero: is a character device, expected a regular file" \
  train --config "$work/vocab_dev.yaml"
refused "training data as a FIFO" "$work/fifo: is a FIFO, expected a regular file" \
  train --config "$work/train_fifo.yaml"
refused "eval data as a FIFO" "$work/fifo: is a FIFO, expected a regular file" \
  train --config "$work/eval_fifo.yaml"

# The same job with regular files trains (the refusals above are about the files alone).
timeout 300 "$T" train --config "$work/good.yaml" >/dev/null 2>"$work/err" ||
  { echo "FAIL: the job with regular files did not train"; sed 's/^/    /' "$work/err"; fail=1; }
((fail == 0)) && echo "trainer_fifo_input: all passed"
exit $fail
