"""Compares the tensors of two safetensors files: prints the largest differences and exits 1 when
any element differs by more than ATOL + RTOL * |b|.

usage: compare_weights.py A.safetensors B.safetensors ATOL RTOL
"""
import sys

import numpy as np
from safetensors.numpy import load_file


def main() -> int:
    a_path, b_path, atol, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    a, b = load_file(a_path), load_file(b_path)
    if sorted(a) != sorted(b):
        print(f"tensor names differ: {sorted(set(a) ^ set(b))}")
        return 1
    worst, worst_name, bad = 0.0, "", []
    for name in sorted(a):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape:
            print(f"{name}: shape {x.shape} vs {y.shape}")
            return 1
        diff = np.abs(x - y)
        excess = diff - (atol + rtol * np.abs(y))
        if diff.size and diff.max() > worst:
            worst, worst_name = float(diff.max()), name
        if diff.size and excess.max() > 0:
            bad.append(f"{name}: max |diff| {diff.max():.3g}")
    print(f"max |diff| {worst:.3g} ({worst_name})")
    for line in bad[:10]:
        print("  over tolerance:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
