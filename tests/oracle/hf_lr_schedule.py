"""Prints the learning rate transformers' scheduler gives at every step, one per line.

Usage: hf_lr_schedule.py KIND LR WARMUP TOTAL LR_END POWER
KIND is linear, constant, cosine or polynomial (get_*_schedule_with_warmup, cosine with its
default num_cycles 0.5). Prints steps 0..TOTAL: the LR before the first scheduler step, then
after each one, with repr() so no digit is lost.
"""
import sys

import torch
from transformers import (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup,
                          get_linear_schedule_with_warmup,
                          get_polynomial_decay_schedule_with_warmup)


def main():
    kind, lr, warmup, total, lr_end, power = sys.argv[1:7]
    lr, warmup, total = float(lr), int(warmup), int(total)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    if kind == "linear":
        sched = get_linear_schedule_with_warmup(opt, warmup, total)
    elif kind == "constant":
        sched = get_constant_schedule_with_warmup(opt, warmup)
    elif kind == "cosine":
        sched = get_cosine_schedule_with_warmup(opt, warmup, total)
    elif kind == "polynomial":
        sched = get_polynomial_decay_schedule_with_warmup(opt, warmup, total,
                                                          lr_end=float(lr_end), power=float(power))
    else:
        raise SystemExit(f"unknown schedule {kind}")
    for _ in range(total + 1):
        print(repr(sched.get_last_lr()[0]))
        opt.step()
        sched.step()


if __name__ == "__main__":
    main()
