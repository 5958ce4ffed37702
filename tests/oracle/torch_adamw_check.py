"""Replays adamw_oracle_test's gradients through torch and compares the results.

AdamW(lr=1e-2, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.05) with decay only where the dump's
`decay` mask is 1, get_linear_schedule_with_warmup(warmup=2, total=steps), clip_grad_norm_(1.0).
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import get_linear_schedule_with_warmup


def main():
    d = load_file(sys.argv[1])
    steps = int(sys.argv[2])
    mask = d["decay"].bool()
    p_decay = torch.nn.Parameter(d["initial"][mask].clone())
    p_plain = torch.nn.Parameter(d["initial"][~mask].clone())
    opt = torch.optim.AdamW([{"params": [p_decay], "weight_decay": 0.05},
                             {"params": [p_plain], "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.98), eps=1e-6)
    sched = get_linear_schedule_with_warmup(opt, 2, steps)
    bad = []
    for s in range(steps):
        g = d[f"grad.{s}"]
        p_decay.grad = g[mask].clone()
        p_plain.grad = g[~mask].clone()
        norm = torch.nn.utils.clip_grad_norm_([p_decay, p_plain], 1.0)
        if abs(norm.item() - d["norms"][s].item()) > 1e-5 * norm.item():
            bad.append(f"step {s}: grad norm {norm.item()} vs ours {d['norms'][s].item()}")
        opt.step()
        sched.step()
    final = torch.empty_like(d["initial"])
    final[mask] = p_decay.detach()
    final[~mask] = p_plain.detach()
    err = (final - d["final"]).abs().max().item()
    if err > 2e-6:
        bad.append(f"parameters differ by up to {err:.3e}")
    st = opt.state[p_decay]
    err_m = (st["exp_avg"] - d["exp_avg"][mask]).abs().max().item()
    err_v = (st["exp_avg_sq"] - d["exp_avg_sq"][mask]).abs().max().item()
    if err_m > 1e-6 or err_v > 1e-7:
        bad.append(f"optimizer state differs: exp_avg {err_m:.3e}, exp_avg_sq {err_v:.3e}")
    if bad:
        print("MISMATCH:\n  " + "\n  ".join(bad))
        return 1
    print(f"ok: {steps} AdamW steps with schedule and clipping agree with torch (max err {err:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
