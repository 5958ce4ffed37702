#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 4: JSON nested 300,000 levels deep crashed ringmaster-trainer with SIGSEGV
# (nlohmann's parser is iterative, but the error messages printed the value with the recursive
# dump()), and a crash is restarted, so every restart was spent on it. Four places a job author
# controls: a sentence-transformers modules.json, a safetensors header's 'shape', a
# tokenizer.json vocabulary id and a JSON Lines label. Each must exit 3 (kExitBadJob in
# common/exit_codes.h: the agent fails the job without restarting it) with an error naming the
# file and the nesting limit. Before the fix each ended with signal 11 (exit 139).
set -uo pipefail
T=${TRAINER:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
cd "$work" || exit 1

# 300,000 '[' then as many ']' (in a file: too long for an argument).
python3 -c "import sys; sys.stdout.write('[' * 300000 + ']' * 300000)" >deep.json

# A real model directory to break: the trainer's own export of a tiny model.
"$T" gen-data --out data --train 32 --dev 8 --seed 3 >/dev/null
cat >make.yaml <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {epochs: 1, max_steps: 1, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3}
output: {dir: made, checkpoint_every_steps: 0}
YAML
"$T" train --config make.yaml >make.log 2>&1 || { cat make.log; echo "FAIL: no model made"; exit 1; }
[[ -f made/final/model.safetensors && -f made/final/tokenizer.json ]] ||
  { ls -R made; echo "FAIL: the export has no model.safetensors/tokenizer.json"; exit 1; }

# job NAME INIT_FROM TRAIN FORMAT: a job file fine-tuning INIT_FROM (or a fresh model) on TRAIN.
job() {
  {
    echo "model:"
    if [[ -n $2 ]]; then
      echo "  init_from: $2"
    else
      echo "  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2,"
      echo "           intermediate_size: 32, max_position_embeddings: 64}"
      echo "  vocab: data/vocab.txt"
    fi
    echo "data: {train: $3, format: $4, max_seq_len: 32}"
    echo "train: {epochs: 1, max_steps: 1, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3}"
    echo "output: {dir: out-$1, checkpoint_every_steps: 0}"
  } >"$1.yaml"
}

# refused NAME PATTERN: the trainer on NAME.yaml exits 3 with stderr matching PATTERN.
refused() {
  timeout 60 "$T" train --config "$1.yaml" >"$1.out" 2>"$1.err"
  local rc=$?
  if ((rc != 3)) || ! grep -qE -- "$2" "$1.err"; then
    echo "FAIL $1: rc=$rc (3 expected; 139 is SIGSEGV), stderr:"
    grep -v ' INFO ' "$1.err" | head -c 600 | sed 's/^/    /'
    failed=1
  else
    echo "ok   $1: exit 3: $(grep -v ' INFO ' "$1.err" | grep -o 'JSON nested.*' | head -1)"
  fi
}

# 1. modules.json: a list nested 300,000 deep.
mkdir st && cp deep.json st/modules.json
job modules st data/train.tsv tsv
refused modules "st/modules.json: JSON nested deeper than 64 levels \(at byte 64\)"

# 2. model.safetensors: a tensor whose 'shape' is nested 300,000 deep.
cp -r made/final shape
python3 - shape/model.safetensors deep.json <<'PY'
import struct, sys
header = '{"bert.embeddings.word_embeddings.weight": {"dtype": "F32", "shape": [%s], "data_offsets": [0, 4]}}' % open(sys.argv[2]).read()
raw = header.encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(raw)) + raw + b"\0\0\0\0")
PY
job shape shape data/train.tsv tsv
refused shape "shape/model.safetensors: header: JSON nested deeper than 64 levels"

# 3. tokenizer.json (no vocab.txt): a vocabulary id nested 300,000 deep.
cp -r made/final tok && rm tok/vocab.txt
python3 - tok/tokenizer.json deep.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
first = next(iter(j["model"]["vocab"]))
j["model"]["vocab"][first] = "@DEEP@"
open(sys.argv[1], "w").write(json.dumps(j).replace('"@DEEP@"', open(sys.argv[2]).read()))
PY
job tok tok data/train.tsv tsv
refused tok "tok/tokenizer.json: JSON nested deeper than 64 levels"

# 4. JSON Lines data: a label nested 300,000 deep.
{
  for i in 1 2 3 4 5 6 7 8; do echo "{\"sentence\": \"good movie $i\", \"label\": 1}"; done
  printf '{"sentence": "bad", "label": %s}\n' "$(cat deep.json)"
} >deep.jsonl
job jsonl "" deep.jsonl jsonl
refused jsonl "deep.jsonl:9: .*JSON nested deeper than 64 levels"

((failed == 0)) || exit 1
echo "json_depth_bomb: 4 passed, 0 failed"
