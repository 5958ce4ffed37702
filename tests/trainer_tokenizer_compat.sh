#!/usr/bin/env bash
# ctest-labels: integration
# model.tokenizer_compat: fast through the real binaries (docs/trainer.md, "Tokenizer"):
#  - final/tokenizer_config.json records "ringmaster_tokenizer_compat": "fast";
#  - predict tokenizes as the fast tokenizer by default: "a good<U+2A6E0> movie" (an unassigned
#    code point, which the slow tokenizer drops and the fast one keeps, making its word [UNK])
#    predicts differently from "a good movie", as with --tokenizer-compat fast, while
#    --tokenizer-compat slow predicts the two alike;
#  - tokenize --tokenizer-compat fast gives that line [UNK], slow the ids of "a good movie";
#  - where transformers is importable, AutoTokenizer on final/ (the fast tokenizer, from the
#    exported tokenizer.json) gives the ids of tokenize --tokenizer-compat fast.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
"$T" gen-data --out data --train 400 --dev 20 --seed 5 >/dev/null
cat >job.yaml <<'YAML'
name: tokenizer-fast
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 32}
  vocab: data/vocab.txt
  tokenizer_compat: fast
  num_labels: 2
data: {train: data/train.tsv, max_seq_len: 16}
train: {max_steps: 10, global_batch_size: 16, micro_batch_size: 16, lr: 1.0e-3, seed: 3}
output: {dir: out, checkpoint_every_steps: 0}
YAML
"$T" train --config job.yaml >train.log 2>&1 || { cat train.log; fail "training failed"; }
grep -q '"ringmaster_tokenizer_compat": "fast"' out/final/tokenizer_config.json ||
  { cat out/final/tokenizer_config.json; fail "final/tokenizer_config.json does not record fast"; }
for w in a good movie; do
  grep -qx "$w" out/final/vocab.txt || fail "the generated vocab has no '$w'; pick other words"
done

unassigned=$(printf '\xf0\xaa\x9b\xa0')  # U+2A6E0, unassigned in Unicode 14
printf 'sentence\na good movie\na good%s movie\n' "$unassigned" >in.tsv
"$T" predict --model out/final --input in.tsv >pred_default.tsv || fail "predict failed"
"$T" predict --model out/final --input in.tsv --tokenizer-compat fast >pred_fast.tsv
"$T" predict --model out/final --input in.tsv --tokenizer-compat slow >pred_slow.tsv
row() { sed -n "$(($2 + 1))p" "$1" | cut -f2-; }  # the logits of input row $2
cmp -s pred_default.tsv pred_fast.tsv ||
  { paste pred_default.tsv pred_fast.tsv; fail "predict's default is not the recorded fast mode"; }
[[ "$(row pred_slow.tsv 1)" == "$(row pred_slow.tsv 2)" ]] ||
  { cat pred_slow.tsv; fail "slow mode: the unassigned code point was not dropped"; }
[[ "$(row pred_fast.tsv 1)" != "$(row pred_fast.tsv 2)" ]] ||
  { cat pred_fast.tsv; fail "fast mode: the row with an unassigned code point predicts as without"; }
echo "ok   predict: fast by default from final/ (row 2 differs from row 1), slow when asked"

tail -n +2 in.tsv | "$T" tokenize --vocab out/final/vocab.txt --tokenizer-compat fast >fast.ids
tail -n +2 in.tsv | "$T" tokenize --vocab out/final/vocab.txt --tokenizer-compat slow >slow.ids
unk=$(($(grep -nx '\[UNK\]' out/final/vocab.txt | cut -d: -f1) - 1))
good=$(($(grep -nx 'good' out/final/vocab.txt | cut -d: -f1) - 1))
[[ "$(sed -n 2p slow.ids)" == "$(sed -n 1p slow.ids)" ]] || fail "slow ids: $(cat slow.ids)"
fast2=" $(sed -n 2p fast.ids) "
[[ $fast2 == *" $unk "* && $fast2 != *" $good "* ]] ||
  fail "fast ids of row 2 are '$fast2'; expected [UNK] ($unk) in place of good ($good)"
if ! "$PY" -c 'import transformers, tokenizers' 2>/dev/null; then
  echo "note: transformers not importable by $PY; AutoTokenizer not compared"
  exit 0
fi
"$PY" - out/final in.tsv fast.ids <<'PY' || fail "AutoTokenizer disagrees with tokenize --tokenizer-compat fast"
import sys
from transformers import AutoTokenizer
final, inp, ids = sys.argv[1:4]
tok = AutoTokenizer.from_pretrained(final)
assert tok.is_fast, type(tok)
with open(inp, encoding="utf-8") as f:
    rows = f.read().split("\n")[1:-1]
ours = [list(map(int, l.split())) for l in open(ids).read().splitlines()]
theirs = [tok(r)["input_ids"] for r in rows]
assert ours == theirs, (ours, theirs)
PY
echo "ok   AutoTokenizer(final/) = tokenize --tokenizer-compat fast"
