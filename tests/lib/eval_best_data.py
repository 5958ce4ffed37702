"""Writes the overfitting task of the best-model tests into DIR (after `gen-data --out DIR`,
whose vocab.txt it uses): train.tsv (320 rows) and dev.tsv (64 rows) of random words of the
vocabulary around "wonderful" (label 1) or "terrible" (0), 15% of the labels flipped, so that the
tiny model learns it in a few dozen steps and then overfits. Fixed seed: the same files each run.
Used by tests/trainer_eval_best.sh and tests/local_eval_best.sh."""
import random
import sys

d = sys.argv[1]
words = [w.strip() for w in open(f"{d}/vocab.txt") if w.strip().isalpha()]
assert "wonderful" in words and "terrible" in words
r = random.Random(3)
for name, n in (("train", 320), ("dev", 64)):
    with open(f"{d}/{name}.tsv", "w") as f:
        f.write("sentence\tlabel\n")
        for _ in range(n):
            y = r.randint(0, 1)
            ws = [r.choice(words) for _ in range(r.randint(3, 8))]
            ws.insert(r.randint(0, len(ws)), "wonderful" if y else "terrible")
            if r.random() < 0.15:
                y = 1 - y
            f.write(" ".join(ws) + f"\t{y}\n")
