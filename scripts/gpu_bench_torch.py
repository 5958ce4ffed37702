#!/usr/bin/env python3
"""PyTorch side of scripts/gpu-check.sh's benchmark: one measurement per process, one JSON line.

  --mode matmul   the bf16 matrix-product ceiling: torch.matmul on two N x N random matrices
                  (TFLOP/s, median of the timed products after warm-ups)
  --mode bert     transformers' BertForSequenceClassification training steps (forward, loss,
                  backward, gradient clipping at 1.0, AdamW) on random token ids with a full
                  attention mask, every row exactly --seq tokens, like ringmaster's benchmark
                  job; --variant eager-fp32 | eager-bf16-sdpa | compile-bf16-sdpa

On a machine without CUDA it runs on the CPU (the emulator rehearsal: shapes only, no figure).
Exit 3 when the variant cannot run here (no torch.compile, say), with the reason in the JSON.
"""
import argparse
import json
import statistics
import sys
import time


def emit(d, rc=0):
    print(json.dumps(d), flush=True)
    sys.exit(rc)


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def matmul(args, torch):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    n = args.n
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    for _ in range(3):
        torch.matmul(a, b)
    sync(torch, device)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        sync(torch, device)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    emit({"mode": "matmul", "device": device, "dtype": str(dtype).replace("torch.", ""), "n": n,
          "tflops": 2.0 * n ** 3 / med / 1e12, "median_ms": med * 1e3,
          "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
          "torch": torch.__version__})


def make_model(args, torch, transformers, attn):
    cfg = transformers.BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.intermediate,
        max_position_embeddings=max(512, args.seq), hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, num_labels=2)
    cls = transformers.BertForSequenceClassification
    try:
        model = cls._from_config(cfg, attn_implementation=attn)
    except (ValueError, ImportError, TypeError, AttributeError) as e:  # no SDPA in an old torch
        print(f"gpu_bench_torch: _from_config(attn_implementation={attn}) refused "
              f"({str(e)[:200]}); trying the config attribute", file=sys.stderr)
        try:
            cfg._attn_implementation = attn
            model = cls(cfg)
        except (ValueError, ImportError, TypeError, AttributeError) as e2:
            print(f"gpu_bench_torch: {attn} refused again ({str(e2)[:200]}); default attention",
                  file=sys.stderr)
            cfg._attn_implementation = "eager"
            model = cls(cfg)
    used = getattr(model.config, "_attn_implementation", None) or "eager"
    return model, used


def bert(args, torch):
    try:
        import transformers
    except ImportError as e:
        emit({"mode": "bert", "variant": args.variant, "error": f"transformers missing: {e}"}, 3)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = "bf16" in args.variant
    compiled = args.variant.startswith("compile")
    if compiled and not hasattr(torch, "compile"):
        emit({"mode": "bert", "variant": args.variant,
              "error": f"torch {torch.__version__} has no torch.compile"}, 3)
    attn = "sdpa" if "sdpa" in args.variant else "eager"
    torch.manual_seed(0)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model, used_attn = make_model(args, torch, transformers, attn)
    model = model.to(device).train()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01,
                                fused=(device == "cuda"))
        fused = device == "cuda"
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
        fused = False
    step_model = torch.compile(model) if compiled else model
    gen = torch.Generator(device="cpu").manual_seed(1)
    batches = []
    for _ in range(4):  # rotate a few batches: random data, not one cached input
        ids = torch.randint(5, args.vocab, (args.batch, args.seq), generator=gen)
        labels = torch.randint(0, 2, (args.batch,), generator=gen)
        batches.append((ids.to(device), torch.ones_like(ids).to(device),
                        torch.zeros_like(ids).to(device), labels.to(device)))

    def step(i):
        ids, mask, types, labels = batches[i % len(batches)]
        if bf16:
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                out = step_model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                                 labels=labels)
        else:
            out = step_model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                             labels=labels)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    t0 = time.perf_counter()
    first = step(0).item()
    sync(torch, device)
    first_step_s = time.perf_counter() - t0
    for i in range(1, args.warmup):
        step(i)
    sync(torch, device)
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(i)
    sync(torch, device)
    elapsed = time.perf_counter() - t0
    last = loss.item()
    sps = args.batch * args.steps / elapsed
    d = {"mode": "bert", "variant": args.variant, "device": device, "torch": torch.__version__,
         "transformers": transformers.__version__, "attn": used_attn, "fused_adamw": fused,
         "batch": args.batch, "seq": args.seq, "steps": args.steps,
         "samples_per_s": sps, "tokens_per_s": sps * args.seq,
         "step_ms": elapsed / args.steps * 1e3, "first_step_s": first_step_s,
         "loss_first": first, "loss_last": last,
         "params": sum(p.numel() for p in model.parameters())}
    if device == "cuda":
        d["peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2 ** 20
        d["peak_reserved_mib"] = torch.cuda.max_memory_reserved() / 2 ** 20
    emit(d)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["matmul", "bert"], required=True)
    p.add_argument("--variant", default="eager-fp32",
                   choices=["eager-fp32", "eager-bf16-sdpa", "compile-bf16-sdpa"])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--intermediate", type=int, default=3072)
    args = p.parse_args()
    try:
        import torch
    except ImportError as e:
        emit({"mode": args.mode, "error": f"torch missing: {e}"}, 3)
    (matmul if args.mode == "matmul" else bert)(args, torch)


if __name__ == "__main__":
    main()
