"""PyTorch side of bench_cpu_train: the same BERT training step with transformers.

Prints one line: RESULT samples_per_s=... rss_mib=... step_ms=...
With --profile also: INFO lines (torch build, BLAS, threads), PROFILE <category> <ms per step>
lines in bench_cpu_train's categories (torch.profiler self CPU time of forward + backward by
operator; clipping + AdamW timed on their own) and TOP lines (the operators taking most time).
"""
import argparse
import resource
import statistics
import time

import torch
from transformers import BertConfig, BertForSequenceClassification


# aten operator → bench_cpu_train's category (self CPU time). Anything else is "rest".
CATEGORIES = {
    "aten::addmm": "gemm", "aten::mm": "gemm",
    "aten::bmm": "attention", "aten::_softmax": "attention",
    "aten::_softmax_backward_data": "attention",
    "aten::native_layer_norm": "layernorm", "aten::native_layer_norm_backward": "layernorm",
    "aten::gelu": "gelu", "aten::gelu_backward": "gelu",
    "aten::native_dropout": "dropout", "aten::native_dropout_backward": "dropout",
    "aten::bernoulli_": "dropout",
    "aten::sum": "bias",
    "aten::embedding": "embedding", "aten::embedding_dense_backward": "embedding",
    "aten::embedding_backward": "embedding", "aten::index_select": "embedding",
    "aten::nll_loss_forward": "embedding", "aten::nll_loss_backward": "embedding",
    "aten::_log_softmax": "embedding", "aten::_log_softmax_backward_data": "embedding",
    "aten::tanh": "embedding", "aten::tanh_backward": "embedding",
}


def profile(model, opt, ids, mask, labels, steps, threads):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    print(f"INFO torch {torch.__version__}, {torch.get_num_threads()} threads (asked {threads}), "
          f"parallel backend {torch.__config__.parallel_info().splitlines()[-1].strip()}")
    for line in torch.__config__.show().splitlines():
        if "CPU capability" in line:
            print("INFO " + line.strip())
        if "BLAS_INFO" in line:
            print("INFO " + line.strip().split(",")[0])
    # forward + backward under the profiler (one session per step); clipping + AdamW outside it,
    # timed on their own. An operator's self time is that of the thread that called it (the
    # OpenMP workers inside it are not separate events), so the self times add up to the wall
    # time of forward + backward less Python's own; that difference goes into "rest".
    cats = {}
    counts = {}
    fb_wall = opt_wall = 0.0
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt_wall += time.perf_counter() - t2
        fb_wall += t1 - t0
        for e in prof.key_averages():
            if e.key.startswith("aten::"):
                cats[e.key] = cats.get(e.key, 0.0) + e.self_cpu_time_total / 1e3
                counts[e.key] = counts.get(e.key, 0) + e.count
    by_cat = {}
    for name, ms in cats.items():
        cat = CATEGORIES.get(name, "rest")
        by_cat[cat] = by_cat.get(cat, 0.0) + ms / steps
    fb_ms = fb_wall * 1e3 / steps
    by_cat["rest"] = by_cat.get("rest", 0.0) + fb_ms - sum(cats.values()) / steps
    by_cat["optimizer"] = opt_wall * 1e3 / steps
    for k, v in sorted(by_cat.items()):
        print(f"PROFILE {k} {v:.2f}")
    print(f"PROFILE total {fb_ms + opt_wall * 1e3 / steps:.2f}")
    for name in sorted(cats, key=lambda n: -cats[n])[:10]:
        print(f"TOP {name} {cats[name] / steps:.1f} ms/step self ({counts[name] // steps} calls/step)")


def main():
    ap = argparse.ArgumentParser()
    for k in ("hidden", "layers", "heads", "inter", "seq", "batch", "steps", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--profile", action="store_true")
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
    if a.profile:
        profile(model, opt, ids, mask, labels, a.steps, a.threads)
    print(f"RESULT samples_per_s={a.batch / med:.4f} rss_mib={rss:.1f} step_ms={med * 1e3:.1f}",
          flush=True)


if __name__ == "__main__":
    main()
