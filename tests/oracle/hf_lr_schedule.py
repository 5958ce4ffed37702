"""Prints the learning rates transformers' schedulers give at every step.

Reads one schedule a line on stdin: KIND LR WARMUP TOTAL LR_END POWER, KIND one of linear,
constant, cosine, polynomial (get_*_schedule_with_warmup, cosine with its default num_cycles
0.5). For each, prints one line: the LR of steps 0..TOTAL (before the first scheduler step, then
after each one), space-separated, with repr() so no digit is lost. One process for all
schedules: importing torch dominates the time.
"""
import sys

import torch
from transformers import (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup,
                          get_linear_schedule_with_warmup,
                          get_polynomial_decay_schedule_with_warmup)


def lrs(kind, lr, warmup, total, lr_end, power):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    if kind == "linear":
        sched = get_linear_schedule_with_warmup(opt, warmup, total)
    elif kind == "constant":
        sched = get_constant_schedule_with_warmup(opt, warmup)
    elif kind == "cosine":
        sched = get_cosine_schedule_with_warmup(opt, warmup, total)
    elif kind == "polynomial":
        sched = get_polynomial_decay_schedule_with_warmup(opt, warmup, total, lr_end=lr_end,
                                                          power=power)
    else:
        raise SystemExit(f"unknown schedule {kind}")
    out = []
    for _ in range(total + 1):
        out.append(repr(sched.get_last_lr()[0]))
        opt.step()
        sched.step()
    return out


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        kind, lr, warmup, total, lr_end, power = line.split()
        print(" ".join(lrs(kind, float(lr), int(warmup), int(total), float(lr_end),
                           float(power))))


if __name__ == "__main__":
    main()
