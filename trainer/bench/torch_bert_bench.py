"""PyTorch side of bench_cpu_train: the same BERT training step with transformers.

Prints one line: RESULT samples_per_s=... rss_mib=... step_ms=...
"""
import argparse
import resource
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    ap = argparse.ArgumentParser()
    for k in ("hidden", "layers", "heads", "inter", "seq", "batch", "steps", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                     intermediate_size=a.inter, num_labels=2, attn_implementation="eager")
    model = BertForSequenceClassification(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1000, cfg.vocab_size, (a.batch, a.seq))
    mask = torch.ones_like(ids)
    labels = torch.arange(a.batch) % 2

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"RESULT samples_per_s={a.batch / med:.4f} rss_mib={rss:.1f} step_ms={med * 1e3:.1f}",
          flush=True)


if __name__ == "__main__":
    main()
