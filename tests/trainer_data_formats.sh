#!/usr/bin/env bash
# ctest-labels: integration
# Data the way users have it (docs/trainer.md, "Data formats"), through the trainer binary:
#  - the generated TSV written out as CSV (Python's csv module: quoted fields, a line break
#    inside one) and as JSON Lines, with other column names (data.text_column/label_column)
#    and extra columns, trains to the very same per-step losses and evaluation as the TSV;
#  - data.format overrides the extension;
#  - a broken CSV or JSON Lines row fails the job naming file:line;
#  - sentence pairs (data.text_pair_column) with string labels: CSV with the names inferred
#    (sorted) and JSON Lines with data.labels train alike, differently from the first texts
#    alone; config.json holds id2label/label2id (data.labels in another order gives another
#    one); predict reads the pair columns recorded in the export, writes a header and class
#    names, and its accuracy is the training run's evaluation; transformers (when installed)
#    reads the names and gives the same logits for the pairs, truncated longest_first at
#    max_seq_len 16;
#  - evaluation reports run_glue's figures: F1 and Matthews correlation (binary), Pearson and
#    Spearman (regression, num_labels 1) in metrics.jsonl, equal to the figures recomputed from
#    predict's output of the exported model.
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

job() {  # $1 = name, $2 = data keys, $3 = max_seq_len (32), $4 = num_labels (2)
  cat >"$work/$1.yaml" <<YAML
name: formats-$1
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
  num_labels: ${4:-2}
data: {$2, max_seq_len: ${3:-32}}
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

# Sentence pairs: the second text decides the label (the first is another row's sentence);
# labels are names.
"$PY" - "$work/data" <<'PY'
import csv, json, sys
d = sys.argv[1]
for split in ("train", "dev"):
    with open(f"{d}/{split}.tsv", encoding="utf-8") as f:
        body = [line.rstrip("\n").split("\t") for line in f][1:]
    names = {"0": "negative", "1": "positive"}
    rows = [(body[(i * 7 + 3) % len(body)][0], s, names[l]) for i, (s, l) in enumerate(body)]
    with open(f"{d}/{split}.pairs.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sentence1", "sentence2", "label"])
        w.writerows(rows)
    with open(f"{d}/{split}.pairs.jsonl", "w", encoding="utf-8") as f:
        for a, b, l in rows:
            f.write(json.dumps({"sentence1": a, "sentence2": b, "label": l}) + "\n")
PY
pairs() { job "$1" "$2, text_column: sentence1" 16; }  # $1 = name, $2 = data keys
pairs pcsv "train: data/train.pairs.csv, eval: data/dev.pairs.csv, text_pair_column: sentence2"
pairs pjsonl "train: data/train.pairs.jsonl, eval: data/dev.pairs.jsonl, text_pair_column: sentence2, labels: [negative, positive]"
pairs prev "train: data/train.pairs.jsonl, text_pair_column: sentence2, labels: [positive, negative]"
grep -q "labels inferred from .*train.pairs.csv.*negative=0, positive=1" "$work/pcsv.log" ||
  { cat "$work/pcsv.log"; fail "the inferred labels were not logged"; }
pairs first "train: data/train.pairs.csv, eval: data/dev.pairs.csv"
"$T" predict --model "$work/out-pcsv/final" --input "$work/data/dev.pairs.csv" --max-len 16 \
  >"$work/pairs.pred" || fail "predict on pairs"
"$PY" - "$work" <<'PY' || fail "pairs"
import csv, json, math, sys
w = sys.argv[1]
def lines(name):
    with open(f"{w}/out-{name}/metrics.jsonl") as f:
        return [json.loads(l) for l in f]
a, b, first = lines("pcsv"), lines("pjsonl"), lines("first")
assert a == b, f"CSV and JSON Lines pairs differ: {a} != {b}"
la = [l["loss"] for l in a if "loss" in l]
lf = [l["loss"] for l in first if "loss" in l]
assert la != lf, "pairs trained as the first texts alone"
with open(f"{w}/out-pcsv/final/ringmaster_data.json") as f:
    cols = json.load(f)
assert cols["text_pair_column"] == "sentence2", cols
with open(f"{w}/pairs.pred") as f:
    pred = [l.rstrip("\n").split("\t") for l in f]
assert pred[0] == ["label", "negative", "positive"], pred[0]
assert {p[0] for p in pred[1:]} <= {"negative", "positive"}, pred[1:3]
def config(name):
    with open(f"{w}/out-{name}/final/config.json") as f:
        c = json.load(f)
    return c["id2label"], c["label2id"]
assert config("pcsv") == ({"0": "negative", "1": "positive"}, {"negative": 0, "positive": 1}), config("pcsv")
assert config("pjsonl") == config("pcsv")
assert config("prev") == ({"0": "positive", "1": "negative"}, {"positive": 0, "negative": 1}), config("prev")
with open(f"{w}/data/dev.pairs.csv", newline="") as f:
    dev = list(csv.reader(f))[1:]
assert len(pred) == len(dev) + 1, (len(pred), len(dev))
acc = sum(p[0] == r[2] for p, r in zip(pred[1:], dev)) / len(dev)
final_eval = [l for l in a if "eval_accuracy" in l][-1]
assert abs(acc - final_eval["eval_accuracy"]) < 1e-9, (acc, final_eval)
print(f"ok   pairs: CSV == JSON Lines losses {[round(x, 6) for x in la]}, != first texts alone;"
      f" predict accuracy {acc:.4f} == evaluation's; id2label {config('pcsv')[0]}")
try:
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer
    from transformers.utils import logging
    logging.set_verbosity_error()  # its notes on truncation and length, once per row
except ImportError:
    print("note: transformers not available; pair encoding not cross-checked")
    sys.exit(0)
model_dir = f"{w}/out-pcsv/final"
tok = BertTokenizer.from_pretrained(model_dir)
model = BertForSequenceClassification.from_pretrained(model_dir, attn_implementation="eager").eval()
assert model.config.id2label == {0: "negative", 1: "positive"}, model.config.id2label
enc = tok([r[0] for r in dev], [r[1] for r in dev], truncation="longest_first", max_length=16,
          padding=True, return_tensors="pt")
truncated = sum(len(tok(r[0], r[1])["input_ids"]) > 16 for r in dev)
assert truncated > 0, "no pair needed truncation: the check would not see longest_first"
with torch.no_grad():
    logits = model(**enc).logits
worst = max(abs(float(logits[i][c]) - float(pred[i + 1][c + 1]))
            for i in range(len(dev)) for c in range(2))
assert worst < 1e-4, f"logits differ from transformers by {worst}"
print(f"ok   transformers on the same pairs ({truncated} of {len(dev)} truncated): "
      f"max logit difference {worst:.2e}")
PY

# A regression run (num_labels 1) on the same texts: 0/1 targets as real values.
job reg "train: data/train.ref.tsv, eval: data/dev.ref.tsv" 32 1
"$T" predict --model "$work/out-reg/final" --input "$work/data/dev.ref.tsv" --max-len 32 \
  >"$work/reg.pred" || fail "predict (regression)"
"$PY" - "$work" <<'PY' || fail "evaluation figures"
import csv, json, math, sys
w = sys.argv[1]
def last_eval(name):
    with open(f"{w}/out-{name}/metrics.jsonl") as f:
        return [json.loads(l) for l in f if "eval_loss" in l][-1]
def pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else 0.0
def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r
# Binary classification: the pairs run, predictions from predict's output.
with open(f"{w}/pairs.pred") as f:
    pred = [l.rstrip("\n").split("\t")[0] for l in f][1:]
with open(f"{w}/data/dev.pairs.csv", newline="") as f:
    truth = [r[2] for r in list(csv.reader(f))[1:]]
tp = sum(p == t == "positive" for p, t in zip(pred, truth))
tn = sum(p == t == "negative" for p, t in zip(pred, truth))
fp = sum(p == "positive" and t == "negative" for p, t in zip(pred, truth))
fn = sum(p == "negative" and t == "positive" for p, t in zip(pred, truth))
f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
den = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
mcc = (tp * tn - fp * fn) / math.sqrt(den) if den else 0.0
e = last_eval("pcsv")
assert abs(e["eval_f1"] - f1) < 1e-9 and abs(e["eval_matthews_correlation"] - mcc) < 1e-9, (e, f1, mcc)
assert "eval_pearson" not in e
print(f"ok   binary: eval_f1 {f1:.4f}, eval_matthews_correlation {mcc:.4f} (tp {tp} fp {fp} fn {fn} tn {tn})")
# Regression.
with open(f"{w}/reg.pred") as f:
    rows = [l.rstrip("\n").split("\t") for l in f]
assert rows[0][0] == "label", rows[0]
score = [float(r[1]) for r in rows[1:]]
with open(f"{w}/data/dev.ref.tsv") as f:
    target = [float(l.rstrip("\n").split("\t")[1]) for l in list(f)[1:]]
p, s = pearson(score, target), pearson(ranks(score), ranks(target))
e = last_eval("reg")
# predict prints 7 significant digits and this briefly trained model's scores spread little, so
# the rounding moves Pearson by ~1e-4 (6.6e-5 seen); the ranks (Spearman) are unchanged by it.
spread = max(score) - min(score)
assert abs(e["eval_pearson"] - p) < 1e-3 and abs(e["eval_spearmanr"] - s) < 1e-6, (e, p, s, spread)
assert "eval_f1" not in e and "eval_matthews_correlation" not in e
print(f"ok   regression: eval_pearson {e['eval_pearson']:.6f} (from predict {p:.6f}), "
      f"eval_spearmanr {s:.6f}; scores spread {spread:.2e}")
PY
echo "PASS"
