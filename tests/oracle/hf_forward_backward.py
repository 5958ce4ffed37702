"""Compares our forward/backward dump with transformers' BertForSequenceClassification.

Loads the exported HF directory, runs the inputs stored in --ours, and checks logits, loss and
every parameter gradient. Exit 0 on agreement, 1 with a report otherwise.
"""
import argparse
import sys

import torch
from safetensors.torch import load_file
from transformers import BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ours", required=True)
    a = ap.parse_args()
    ours = load_file(a.ours)
    model = BertForSequenceClassification.from_pretrained(a.model, attn_implementation="eager")
    model.train()  # dropout probabilities are 0 in the exported config
    labels = ours["labels"]
    if model.config.num_labels > 1:
        labels = labels.long()
    out = model(input_ids=ours["input_ids"], token_type_ids=ours["token_type_ids"],
                attention_mask=ours["attention_mask"], labels=labels)
    out.loss.backward()
    bad = []

    def check(name, ref, got, rtol, atol):
        ref = ref.detach().float()
        err = (ref - got).abs()
        lim = atol + rtol * ref.abs()
        if bool((err > lim).any()):
            bad.append(f"{name}: max abs err {err.max().item():.3e} (ref max {ref.abs().max().item():.3e})")

    check("logits", out.logits, ours["logits"], 1e-4, 1e-5)
    check("loss", out.loss.reshape(1), ours["loss"], 1e-4, 1e-6)
    # Absolute tolerance from the largest gradient of the whole model: some gradients are
    # mathematically zero (the key bias: softmax ignores a per-row constant) and only roundoff
    # remains on both sides.
    global_scale = max(p.grad.abs().max().item() for p in model.parameters() if p.grad is not None)
    n = 0
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        key = "grad." + name
        if key not in ours:
            bad.append(f"{key}: missing in our dump")
            continue
        check(key, g, ours[key], 1e-3, 1e-5 * global_scale)
        n += 1
    if bad:
        print("MISMATCH:\n  " + "\n  ".join(bad))
        return 1
    print(f"ok: logits, loss and {n} parameter gradients agree with transformers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
