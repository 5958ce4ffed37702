#!/usr/bin/env bash
# ctest-labels: integration
# Data the way users have it (docs/trainer.md, "Data formats"), through the trainer binary:
#  - the generated TSV written out as CSV (Python's csv module: quoted fields, a line break
#    inside one) and as JSON Lines, with other column names (data.text_column/label_column)
#    and extra columns, trains to the very same per-step losses and evaluation as the TSV;
#  - data.format overrides the extension;
#  - a broken CSV or JSON Lines row fails the job naming file:line.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$T" gen-data --out "$work/data" --train 96 --dev 24 --seed 5 >/dev/null

"$PY" - "$work/data" <<'PY'
import csv, json, sys
d = sys.argv[1]
for split in ("train", "dev"):
    with open(f"{d}/{split}.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    head, body = rows[0], rows[1:]
    s, l = head.index("sentence"), head.index("label")
    # One text with a line break (whitespace to the tokenizer, as the space it replaces) and
    # one with a quote and a comma, so that the CSV needs RFC 4180 quoting.
    texts = [r[s] for r in body]
    texts[0] = texts[0].replace(" ", "\n", 1)
    texts[1] = texts[1] + ' , "indeed"'
    with open(f"{d}/{split}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "review", "stars"])
        for i, (t, r) in enumerate(zip(texts, body)):
            w.writerow([i, t, r[l]])
    with open(f"{d}/{split}.jsonl", "w", encoding="utf-8") as f:
        for i, (t, r) in enumerate(zip(texts, body)):
            f.write(json.dumps({"id": i, "text": t, "y": int(r[l])}) + "\n")
    # The TSV the others must equal: the same texts, the line break as the space it was.
    with open(f"{d}/{split}.ref.tsv", "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for t, r in zip(texts, body):
            f.write(t.replace("\n", " ") + "\t" + r[l] + "\n")
PY

job() {  # $1 = name, $2 = data keys
  cat >"$work/$1.yaml" <<YAML
name: formats-$1
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {$2, max_seq_len: 32}
train: {max_steps: 6, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3, seed: 7}
output: {dir: out-$1, checkpoint_every_steps: 0}
YAML
  "$T" train --config "$work/$1.yaml" >"$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "$1 did not train"; }
}
job tsv "train: data/train.ref.tsv, eval: data/dev.ref.tsv"
job csv "train: data/train.csv, eval: data/dev.csv, text_column: review, label_column: stars"
job jsonl "train: data/train.jsonl, eval: data/dev.jsonl, text_column: text, label_column: y"
# The extension says CSV; data.format says it is JSON Lines.
cp "$work/data/train.jsonl" "$work/data/train.jsonl.csv"
job forced "train: data/train.jsonl.csv, format: jsonl, text_column: text, label_column: y"

"$PY" - "$work" <<'PY' || fail "figures differ"
import json, sys
w = sys.argv[1]
def lines(name):
    with open(f"{w}/out-{name}/metrics.jsonl") as f:
        return [json.loads(l) for l in f]
ref = lines("tsv")
steps = [l for l in ref if "loss" in l]
evals = [l for l in ref if "eval_loss" in l]
assert len(steps) == 6 and evals, ref
for name in ("csv", "jsonl"):
    got = lines(name)
    assert got == ref, f"{name}: {got} != {ref}"
forced = [l["loss"] for l in lines("forced") if "loss" in l]
assert forced == [l["loss"] for l in steps], forced
print(f"ok   same losses in TSV, CSV and JSON Lines: {[round(l['loss'], 6) for l in steps]}")
print(f"ok   same evaluation: {evals[-1]}")
PY

# Broken rows: exit 3 (a bad job) naming file:line.
expect_bad() {  # $1 = name, $2 = file content, $3 = data keys, $4 = pattern
  printf '%b' "$2" >"$work/data/$1"
  cat >"$work/bad.yaml" <<YAML
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}
  vocab: data/vocab.txt
data: {train: data/$1, $3}
output: {dir: out-bad}
YAML
  local rc=0
  "$T" train --config "$work/bad.yaml" >"$work/bad.log" 2>&1 || rc=$?
  if [[ $rc -ne 3 ]] || ! grep -qE -- "$4" "$work/bad.log"; then
    cat "$work/bad.log"; fail "$1: rc=$rc, expected 3 and /$4/"
  fi
  echo "ok   $1: $(grep -E -- "$4" "$work/bad.log" | head -c 160)"
}
expect_bad open.csv 'review,stars\ngood,1\n"never closed,0\n' "text_column: review, label_column: stars" \
  'open.csv:3: quoted field not closed'
expect_bad nokey.jsonl '{"text": "good", "y": 1}\n{"text": "bad"}\n' "text_column: text, label_column: y" \
  'nokey.jsonl:2: missing key "y"'
expect_bad cols.csv 'sentence,label\ngood,1\n' "text_column: review" \
  'cols.csv:1: missing column "review"'
echo "PASS"
