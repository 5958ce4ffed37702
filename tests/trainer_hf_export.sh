#!/usr/bin/env bash
# ctest-labels: integration
# A run's final/ loads in transformers as users load a model (docs/trainer.md, "Export"):
#  - final/ has tokenizer_config.json (BertTokenizer, model_max_length = the trained
#    max_seq_len, 16 here), special_tokens_map.json and tokenizer.json;
#  - AutoTokenizer gives the fast tokenizer from tokenizer.json; it, the slow BertTokenizer,
#    tokenizer.json read by the tokenizers library and `ringmaster-trainer tokenize` give the
#    same ids for every input row, cut at 16 tokens with truncation=True and no max_length
#    (the recorded length);
#  - pipeline("text-classification", model=final/) predicts the labels and scores of
#    `ringmaster-trainer predict` on the dev rows, a row longer than 16 tokens and an empty one;
#  - predict's --max-len defaults to the recorded 16 (the long row's logits equal --max-len 16's
#    and differ from --max-len 48's), and a blank line in a one-column input is the empty
#    sentence ([CLS] [SEP]), one output line per input line.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
"$PY" -c 'import torch, transformers, tokenizers' 2>/dev/null ||
  { echo "SKIP: transformers not importable by $PY"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
"$T" gen-data --out data --train 4000 --dev 40 --seed 11 >/dev/null
cat >job.yaml <<'YAML'
name: hf-export
model:
  config: {hidden_size: 64, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
  num_labels: 2
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 16}
# Enough to tell the classes apart (dev accuracy 0.75), so that both labels are predicted.
train: {max_steps: 300, global_batch_size: 32, micro_batch_size: 32, lr: 1.0e-3, warmup_ratio: 0.06,
        seed: 3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
"$T" train --config job.yaml >train.log 2>&1 || { cat train.log; fail "training failed"; }
for f in tokenizer_config.json special_tokens_map.json tokenizer.json vocab.txt; do
  [[ -f out/final/$f ]] || { ls out/final; fail "final/ has no $f"; }
done

# The prediction input: the dev sentences (one column), a blank line (the empty sentence) in the
# middle, and a sentence far past 16 tokens at the end.
{
  echo sentence
  tail -n +2 data/dev.tsv | cut -f1 | head -20
  echo
  tail -n +2 data/dev.tsv | cut -f1 | tail -n +21
  tail -n +2 data/dev.tsv | cut -f1 | head -6 | tr '\n' ' '
  echo
} >in.tsv
rows=$(($(wc -l <in.tsv) - 1))
"$T" predict --model out/final --input in.tsv >pred.tsv || fail "predict failed on in.tsv"
[[ $(($(wc -l <pred.tsv) - 1)) -eq $rows ]] || fail "predict gave $(wc -l <pred.tsv) lines for $rows rows"
"$T" predict --model out/final --input in.tsv --max-len 16 >pred16.tsv
"$T" predict --model out/final --input in.tsv --max-len 48 >pred48.tsv
cmp -s pred.tsv pred16.tsv || fail "predict's default max-len is not the trained 16"
[[ $(tail -1 pred.tsv) != "$(tail -1 pred48.tsv)" ]] ||
  fail "the long row predicts the same at 16 and 48 tokens; the test cannot see truncation"
echo "ok   predict: $rows rows, default --max-len = the trained 16"
tail -n +2 in.tsv | "$T" tokenize --vocab out/final/vocab.txt --max-len 16 >ours.ids

"$PY" - out/final in.tsv pred.tsv ours.ids <<'PY' || fail "transformers disagrees"
import json, sys
import torch
from tokenizers import Tokenizer
from transformers import AutoTokenizer, BertTokenizer, pipeline

final, inp, pred, ids_file = sys.argv[1:5]
cfg = json.load(open(f"{final}/tokenizer_config.json"))
assert cfg["tokenizer_class"] == "BertTokenizer" and cfg["model_max_length"] == 16, cfg
with open(inp, encoding="utf-8") as f:
    sentences = f.read().split("\n")[1:-1]
assert "" in sentences and len(sentences) == 42, len(sentences)
fast = AutoTokenizer.from_pretrained(final)
slow = BertTokenizer.from_pretrained(final)
assert fast.is_fast and fast.model_max_length == 16, (type(fast), fast.model_max_length)
ours = [list(map(int, l.split())) for l in open(ids_file).read().splitlines()]
# tokenizer.json on its own too (the tokenizers library; transformers would override its
# normaliser's casing from tokenizer_config.json).
raw = Tokenizer.from_file(f"{final}/tokenizer.json")
raw.enable_truncation(16)
for name, tok in (("fast", fast), ("slow", slow), ("tokenizer.json", raw)):
    got = ([e.ids for e in tok.encode_batch(sentences)] if tok is raw else
           tok(sentences, truncation=True)["input_ids"])
    bad = [i for i in range(len(sentences)) if got[i] != ours[i]]
    assert not bad, f"{name} tokenizer differs on rows {bad[:5]}: {got[bad[0]]} vs {ours[bad[0]]}"
assert max(len(x) for x in ours) == 16 and ours[sentences.index("")] == [fast.cls_token_id, fast.sep_token_id]
print(f"ok   fast, slow and tokenizer.json tokenizers equal ours on {len(sentences)} rows (cut at 16)")

clf = pipeline("text-classification", model=final, device=-1)
out = clf(sentences, truncation=True, top_k=None)
lines = open(pred).read().splitlines()
assert lines[0].split("\t")[0] == "label"
names = lines[0].split("\t")[1:]
worst = 0.0
assert len({max(r, key=lambda d: d["score"])["label"] for r in out}) == 2, "one class predicted"
for i, (row, line) in enumerate(zip(out, lines[1:])):
    f = line.split("\t")
    logits = torch.tensor([float(x) for x in f[1:]])
    probs = torch.softmax(logits, 0)
    hf = {d["label"]: d["score"] for d in row}
    best = max(row, key=lambda d: d["score"])["label"]
    ours_label = names[int(f[0])] if f[0].isdigit() else f[0]
    assert best == ours_label, f"row {i}: pipeline {best}, predict {ours_label} ({row} vs {f})"
    worst = max(worst, max(abs(hf[n] - float(p)) for n, p in zip(names, probs)))
assert worst < 1e-4, worst
print(f"ok   pipeline labels equal predict's on {len(out)} rows; scores within {worst:.1e}")
PY
echo "ok: final/ loads in transformers' AutoTokenizer and pipeline"
