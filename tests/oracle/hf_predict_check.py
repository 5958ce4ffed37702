"""Loads an exported model directory with transformers, predicts a TSV and compares with ours.

Usage: hf_predict_check.py --model DIR --input FILE.tsv --ours PRED.tsv [--max-len N]
Exit 0 when every row's logits agree (atol 1e-4 + rtol 1e-4) and labels match, else 1.
"""
import argparse
import csv
import sys

import torch
from transformers import BertForSequenceClassification, BertTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--max-len", type=int, default=128)
    a = ap.parse_args()
    tok = BertTokenizer.from_pretrained(a.model)
    model = BertForSequenceClassification.from_pretrained(a.model, attn_implementation="eager")
    model.eval()
    with open(a.input, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    sentences = [r[0] for r in rows]
    with open(a.ours, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("label\t"):
        print("our output has no header line")
        return 1
    ours = [list(map(float, line.split("\t"))) for line in lines[1:]]
    if len(ours) != len(sentences):
        print(f"row count differs: ours {len(ours)}, input {len(sentences)}")
        return 1
    bad = 0
    max_len = min(a.max_len, model.config.max_position_embeddings)
    with torch.no_grad():
        for i in range(0, len(sentences), 64):
            enc = tok(sentences[i:i + 64], padding=True, truncation=True, max_length=max_len,
                      return_tensors="pt")
            logits = model(**enc).logits
            for j, row in enumerate(logits):
                mine = torch.tensor(ours[i + j][1:])
                label = int(ours[i + j][0])
                if not torch.allclose(row, mine, atol=1e-4, rtol=1e-4) or label != int(row.argmax()):
                    if bad < 5:
                        print(f"row {i + j}: transformers {row.tolist()} ours {ours[i + j]}")
                    bad += 1
    if bad:
        print(f"MISMATCH in {bad} of {len(sentences)} rows")
        return 1
    print(f"ok: {len(sentences)} rows agree with transformers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
