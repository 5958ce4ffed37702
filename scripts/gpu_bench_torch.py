#!/usr/bin/env python3
"""PyTorch side of scripts/gpu-check.sh's benchmark: one measurement per process, one JSON line.

  --mode matmul   the bf16 matrix-product ceiling: torch.matmul on two N x N random matrices
                  (TFLOP/s, median of the timed products after warm-ups)
  --mode bert     transformers' BertForSequenceClassification training steps (forward, loss,
                  backward, gradient clipping at 1.0, AdamW) on random token ids with a full
                  attention mask, every row exactly --seq tokens, like ringmaster's benchmark
                  job; --variant eager-fp32 | eager-bf16-sdpa | compile-bf16-sdpa

On a machine without CUDA it runs on the CPU (the emulator rehearsal: shapes only, no figure).
Exit 3 when the variant cannot run here (no torch.compile, no C compiler or Python.h for
Inductor), exit 4 when it fails while running (any exception of PyTorch or transformers: the
check reports it and goes on), with the reason in the JSON. --until-stable warms up (beyond
--warmup steps, within --warmup-max-s seconds) until the step time is stable, so that a
torch.compile recompile cannot land in the timed steps.
"""
import os
import shutil
import sysconfig
import traceback
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


def is_stable(times, n=3, tol=0.05):
    """True when the last N warm-up step times lie within TOL of their median."""
    if len(times) < n:
        return False
    last = sorted(times[-n:])
    med = last[n // 2]
    return med > 0 and (last[-1] - last[0]) <= tol * med


def compile_unavailable(torch):
    """Why torch.compile cannot build here, or None: Inductor compiles C++/Triton helpers at run
    time, which needs a C compiler and the interpreter's Python.h."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    cc = os.environ.get("CC")
    if not ((cc and shutil.which(cc)) or shutil.which("cc") or shutil.which("gcc") or
            shutil.which("clang")):
        return "no C compiler (cc/gcc/clang) on the PATH: Inductor cannot build its kernels"
    inc = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(inc, "Python.h")):
        return f"no Python.h in {inc}: Inductor cannot build its helpers"
    return None


def compiled_graphs(torch):
    """How many graphs torch.compile has compiled so far (None where torch does not say)."""
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001
        return None


def make_model(args, torch, transformers, attn):
    cfg = transformers.BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.intermediate,
        max_position_embeddings=max(512, args.seq), hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, num_labels=2)
    cls = transformers.BertForSequenceClassification

    def from_config():
        return cls._from_config(cfg, attn_implementation=attn)

    def config_attribute():
        cfg._attn_implementation = attn
        return cls(cfg)

    def set_after():  # transformers 5.x: model.set_attn_implementation
        m = cls(cfg)
        m.set_attn_implementation(attn)
        return m

    # Each way transformers 4.x/5.x has offered to choose the attention; any exception (their
    # types changed between versions) moves on to the next, the last is the default attention.
    model, errors = None, []
    for way in (from_config, config_attribute, set_after):
        try:
            model = way()
            break
        except Exception as e:  # noqa: BLE001
            errors.append(f"{way.__name__}: {type(e).__name__}: {str(e)[:160]}")
            print(f"gpu_bench_torch: attention {attn} via {errors[-1]}", file=sys.stderr)
    if model is None:
        model = cls(transformers.BertConfig(**{k: getattr(cfg, k) for k in (
            "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "hidden_dropout_prob",
            "attention_probs_dropout_prob", "num_labels")}))
    used = getattr(model.config, "_attn_implementation", None) or "eager"
    return model, used, errors


def bert(args, torch):
    try:
        import transformers
    except ImportError as e:
        emit({"mode": "bert", "variant": args.variant, "error": f"transformers missing: {e}"}, 3)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = "bf16" in args.variant
    compiled = args.variant.startswith("compile")
    if compiled:
        why = compile_unavailable(torch)
        if why:
            emit({"mode": "bert", "variant": args.variant, "error": why}, 3)
    attn = "sdpa" if "sdpa" in args.variant else "eager"
    torch.manual_seed(0)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model, used_attn, attn_errors = make_model(args, torch, transformers, attn)
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
    warm_times, warm_start = [], time.perf_counter()
    i = 1
    while True:
        if i >= args.warmup and (not args.until_stable or is_stable(warm_times) or
                                 time.perf_counter() - warm_start > args.warmup_max_s):
            break
        t1 = time.perf_counter()
        step(i)
        sync(torch, device)
        warm_times.append(time.perf_counter() - t1)
        i += 1
    graphs_before = compiled_graphs(torch)
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
         "loss_first": first, "loss_last": last, "warmup_steps": i,
         "warmup_stable": is_stable(warm_times),
         "warmup_last_step_ms": [round(t * 1e3, 2) for t in warm_times[-3:]],
         "attn_errors": attn_errors,
         "params": sum(p.numel() for p in model.parameters())}
    graphs_after = compiled_graphs(torch)
    if graphs_before is not None and graphs_after is not None:
        d["graphs_compiled_while_timed"] = graphs_after - graphs_before
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
    p.add_argument("--until-stable", action="store_true")
    p.add_argument("--warmup-max-s", type=float, default=60)
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
    try:
        (matmul if args.mode == "matmul" else bert)(args, torch)
    except Exception as e:  # noqa: BLE001  any failure of a variant is reported, not a crash
        tb = traceback.format_exc().strip().splitlines()
        emit({"mode": args.mode, "variant": args.variant,
              "error": f"{type(e).__name__}: {str(e)[:300]}", "traceback": tb[-6:]}, 4)


if __name__ == "__main__":
    main()
