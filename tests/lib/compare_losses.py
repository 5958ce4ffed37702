"""Compares the per-step training losses of two metrics.jsonl files.

    compare_losses.py GOT.jsonl REF.jsonl STEPS [REL_TOL]

A run that resumed logs some steps again: the last line of each step counts (the lineage that
made it into the final model). Fails when GOT lacks any step 1..STEPS or a loss differs from
REF's by more than REL_TOL (default 1e-4) relative.
"""
import json
import sys


def losses(path):
    last = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j:
                last[j["step"]] = j["loss"]
    return last


def main():
    got, ref = losses(sys.argv[1]), losses(sys.argv[2])
    n = int(sys.argv[3])
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
    missing = [s for s in range(1, n + 1) if s not in got or s not in ref]
    if missing:
        sys.exit(f"steps missing: {missing[:10]}")
    worst = max(abs(got[s] - ref[s]) / max(abs(ref[s]), 1e-6) for s in range(1, n + 1))
    print(f"{n} step losses, max relative diff {worst:.2e}")
    sys.exit(0 if worst < tol else 1)


if __name__ == "__main__":
    main()
