#!/usr/bin/env bash
# ctest-labels: integration
# Model directories as users have them (docs/job-reference.md, model.init_from), built here
# with transformers from a tiny random BertModel (no network), fine-tuned through the trainer:
#  - vocab.txt + config.json + model.safetensors (the reference);
#  - tokenizer.json but no vocab.txt: the vocabulary and the normaliser come from tokenizer.json;
#    the same losses as the reference (the data has capitals: lowercase is read, not assumed),
#    and final/vocab.txt is the vocabulary written out; with "lowercase": false the losses
#    differ and final/ says do_lower_case false;
#  - sentence-transformers folders (modules.json), the transformer in 0_Transformer/ or at the
#    root: the same losses as the reference, and the log names the mean pooling replaced by the
#    classification head;
#  - broken directories fail the job (exit 3) naming the file and what is missing.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
"$PY" -c 'import torch, transformers, tokenizers, safetensors' 2>/dev/null ||
  { echo "SKIP: transformers not importable by $PY"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
"$T" gen-data --out data --train 64 --dev 16 --seed 9 >/dev/null
grep -q '[A-Z]' data/train.tsv || fail "the data has no capitals; lowercasing would not show"

"$PY" - data/vocab.txt <<'PY'
import json, os, shutil, sys
import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

vocab = sys.argv[1]
torch.manual_seed(0)
n = sum(1 for _ in open(vocab, encoding="utf-8"))
cfg = BertConfig(vocab_size=n, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=48)
model = BertModel(cfg)
model.save_pretrained("plain", safe_serialization=True)
BertTokenizerFast(vocab).save_pretrained("plain")
assert os.path.exists("plain/tokenizer.json") and os.path.exists("plain/vocab.txt")

def copy(dst, drop=()):
    shutil.copytree("plain", dst)
    for f in drop:
        os.remove(f"{dst}/{f}")

copy("tokjson", drop=["vocab.txt"])
copy("tokjson_cased", drop=["vocab.txt", "tokenizer_config.json"])
j = json.load(open("tokjson_cased/tokenizer.json"))
j["normalizer"]["lowercase"] = False
json.dump(j, open("tokjson_cased/tokenizer.json", "w"))

def pooling(dst):
    os.makedirs(f"{dst}/1_Pooling")
    json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False},
              open(f"{dst}/1_Pooling/config.json", "w"))
    os.makedirs(f"{dst}/2_Normalize")

def modules(dst, path):
    json.dump([{"idx": 0, "name": "0", "path": path,
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize"}],
              open(f"{dst}/modules.json", "w"))

# As sentence-transformers saves with the transformer in a subfolder, and at the root.
os.makedirs("st_sub")
shutil.copytree("plain", "st_sub/0_Transformer")
pooling("st_sub"); modules("st_sub", "0_Transformer")
copy("st_root"); pooling("st_root"); modules("st_root", "")

# Broken ones.
copy("no_tok", drop=["vocab.txt", "tokenizer.json"])
copy("bpe", drop=["vocab.txt"])
j = json.load(open("bpe/tokenizer.json")); j["model"]["type"] = "BPE"
json.dump(j, open("bpe/tokenizer.json", "w"))
copy("gap", drop=["vocab.txt"])
j = json.load(open("gap/tokenizer.json")); j["model"]["vocab"]["hello-gap"] = n + 5
json.dump(j, open("gap/tokenizer.json", "w"))
copy("accents", drop=["vocab.txt"])
j = json.load(open("accents/tokenizer.json")); j["normalizer"]["strip_accents"] = False
json.dump(j, open("accents/tokenizer.json", "w"))
os.makedirs("st_none"); pooling("st_none")
json.dump([{"idx": 1, "name": "1", "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling"}], open("st_none/modules.json", "w"))
os.makedirs("st_empty/0_Transformer"); pooling("st_empty"); modules("st_empty", "0_Transformer")
PY

train() {  # $1 = name (the model directory); prints nothing, fails the test when training fails
  cat >"$1.yaml" <<YAML
name: dirs-$1
model: {init_from: $1, num_labels: 2}
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 24}
train: {max_steps: 4, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3, seed: 5}
output: {dir: out-$1, checkpoint_every_steps: 0}
YAML
  "$T" train --config "$1.yaml" >"$1.log" 2>&1
}
losses() { "$PY" -c 'import json, sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"loss\"" in l])' "out-$1/metrics.jsonl"; }

for d in plain tokjson tokjson_cased st_sub st_root; do
  train "$d" || { cat "$d.log"; fail "$d did not train"; }
done
ref=$(losses plain)
[[ $ref == \[*,*,*,*\] ]] || fail "reference losses: $ref"
for d in tokjson st_sub st_root; do
  [[ $(losses "$d") == "$ref" ]] || fail "$d: losses $(losses "$d") != plain's $ref"
done
echo "ok   tokenizer.json only, sentence-transformers (0_Transformer/, root): the losses of vocab.txt: $ref"
[[ $(losses tokjson_cased) != "$ref" ]] || fail "tokenizer.json's lowercase false was not read"
grep -q '"do_lower_case": false' out-tokjson_cased/final/tokenizer_config.json ||
  fail "the cased model's export is not cased"
cmp -s plain/vocab.txt out-tokjson/final/vocab.txt || fail "final/vocab.txt is not tokenizer.json's vocabulary"
echo "ok   tokenizer.json's lowercase false: other losses $(losses tokjson_cased), exported cased"
for d in "st_sub:(0_Transformer/)" "st_root:(the folder itself)"; do
  grep -qF "/${d%%:*} is a sentence-transformers model: its transformer ${d#*:} is fine-tuned; mean_tokens pooling (1_Pooling), Normalize (2_Normalize) replaced by the classification head" "${d%%:*}.log" ||
    { cat "${d%%:*}.log"; fail "${d%%:*}: the log does not say the mean pooling is replaced"; }
done
echo "ok   $(grep -o 'st_sub is a sentence-transformers.*' st_sub.log | head -c 200)"

expect_bad() {  # $1 = directory, $2 = pattern the error must match
  local rc=0
  train "$1" || rc=$?
  if [[ $rc -ne 3 ]] || ! grep -qE -- "$2" "$1.log"; then
    cat "$1.log"; fail "$1: rc=$rc, expected 3 and /$2/"
  fi
  echo "ok   $1: $(grep -oE -- "$2.*" "$1.log" | head -c 150)"
}
expect_bad no_tok "no_tok: has neither vocab.txt nor tokenizer.json"
expect_bad bpe "bpe/tokenizer.json: model.type is 'BPE'"
expect_bad gap "gap/tokenizer.json: model.vocab\[\"hello-gap\"\] is [0-9]+; ids must be"
expect_bad accents "accents/tokenizer.json: normalizer.strip_accents is false with lowercase true"
expect_bad st_none "st_none/modules.json: no module of type sentence_transformers.models.Transformer"
expect_bad st_empty "st_empty/0_Transformer/config.json: no such file"
echo "ok: model directories with tokenizer.json only and sentence-transformers folders train"
