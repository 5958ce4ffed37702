"""Where HF's fast BertTokenizer (tokenizer.json, Rust) differs from the slow one (Python).

Usage: tokenizer_fast_slow_ranges.py VOCAB.txt [--cased]
Tokenizes "x" + c + "y" for every code point c above ASCII (surrogates excepted) with both, and
prints the code-point ranges where they differ, grouped by Python's Unicode category and the
two results, then a count per category. The trainer's tokenizer reproduces either
(model.tokenizer_compat, docs/trainer.md, "Tokenizer"); its fast mode's character tables
(trainer/text/fast_char_classes.cc) were measured from these ranges, and
tests/tokenizer_fast_code_points.sh checks the fast mode on every code point.
"""
import argparse
import collections
import os
import tempfile
import unicodedata

from transformers import BertTokenizer, BertTokenizerFast


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vocab")
    ap.add_argument("--cased", action="store_true")
    a = ap.parse_args()
    with open(a.vocab, encoding="utf-8") as f:
        vocab = f.read().splitlines()
    # Pieces that make "x?y" tokenize visibly: kept, dropped, split or [UNK].
    vocab += [t for t in ("x", "y", "##x", "##y", "xy") if t not in vocab]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        slow = BertTokenizer(path, do_lower_case=not a.cased)
        fast = BertTokenizerFast(path, do_lower_case=not a.cased)
        ranges = []
        for cp in range(0x80, 0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            s = f"x{chr(cp)}y"
            got_slow, got_fast = slow.tokenize(s), fast.tokenize(s)
            if got_slow == got_fast:
                continue
            key = (unicodedata.category(chr(cp)), tuple(got_slow), tuple(got_fast))
            if ranges and ranges[-1][1] == cp - 1 and ranges[-1][2] == key:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp, key])
    total = sum(hi - lo + 1 for lo, hi, _ in ranges)
    for lo, hi, (cat, s, f) in ranges:
        print(f"U+{lo:04X}-U+{hi:04X}\t{cat}\tslow {list(s)}\tfast {list(f)}")
    print(f"{total} code points differ in {len(ranges)} ranges")
    print(dict(collections.Counter(k[0] for _, _, k in ranges)))


if __name__ == "__main__":
    main()
