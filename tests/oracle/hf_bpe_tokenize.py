#!/usr/bin/env python3
"""Reference ids from Hugging Face's RoBERTa tokenizers, for the C++ byte-level BPE oracle test.

--train CORPUS --out DIR: trains a small byte-level BPE vocabulary on CORPUS (one JSON value per
line, as below) with the `tokenizers` library's ByteLevelBPETokenizer and RoBERTa's special
tokens, and saves DIR/vocab.json and DIR/merges.txt. Nothing is downloaded. It also writes
DIR/regex_classes.txt, the slow tokenizer's letter and number classes (write_regex_classes).

--dir DIR --input IN --output OUT: loads DIR's vocab.json + merges.txt as transformers'
RobertaTokenizer (slow, the default) or, with --fast 1, RobertaTokenizerFast, and writes one
line per input line: the space-separated `tokenizer(...)["input_ids"]`. An input line is a JSON
string (the text), {"hex": "..."} (raw bytes, decoded as UTF-8 with errors="replace", which is
how invalid input reaches the tokenizer), or {"pair": [a, b]} with a and b either of those (a
sentence pair). With --max-length (--max-length-pairs for pairs) the ids are truncated to that
length the way HF truncates (truncation=True: longest_first). With --all-modes, both tokenizers
with add_prefix_space off and on, into OUT.slow, OUT.fast, OUT.slow_prefix and OUT.fast_prefix.
--train and an encoding can be asked for in one run (--dir then names the output of training).

Exits 77 when transformers or tokenizers cannot be imported.
"""
import argparse
import json
import os
import sys


def text_of(value):
    if isinstance(value, dict):
        return bytes.fromhex(value["hex"]).decode("utf-8", errors="replace")
    return value


def read_lines(path):
    with open(path, "rb") as f:
        raw = f.read().decode("utf-8")
    # JSON escapes every "\n" inside a value, so "\n" is the only record separator.
    return [json.loads(line) for line in raw.split("\n") if line]


def write_regex_classes(path):
    """The code points the slow RobertaTokenizer's pattern (the `regex` module, whose Unicode
    tables are newer than Python's own) counts as \\p{L} or \\p{N}: one "L|N first last" range a
    line, in hex."""
    import regex

    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    with open(path, "w", encoding="ascii") as f:
        for cls in ("L", "N"):
            for m in regex.finditer(r"\p{%s}+" % cls, text):
                first, last = ord(m.group()[0]), ord(m.group()[-1])
                # A match never spans the surrogate gap: U+D7FF and U+E000 are not L or N.
                f.write(f"{cls} {first:x} {last:x}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train")
    ap.add_argument("--out")
    ap.add_argument("--vocab-size", type=int, default=4000)
    ap.add_argument("--dir")
    ap.add_argument("--fast", type=int, choices=(0, 1), default=0)
    ap.add_argument("--add-prefix-space", type=int, choices=(0, 1), default=0)
    ap.add_argument("--input")
    ap.add_argument("--output")
    ap.add_argument("--max-length", type=int, default=0)
    ap.add_argument("--max-length-pairs", type=int, default=0)
    ap.add_argument("--all-modes", action="store_true")
    args = ap.parse_args()
    try:
        import tokenizers
        import transformers
    except ImportError as e:
        print(f"cannot import transformers / tokenizers: {e}", file=sys.stderr)
        return 77  # "skipped", for the test that runs this script

    if args.train:
        if not (args.out or args.dir):
            ap.error("--train needs --out or --dir")
        texts = []
        for value in read_lines(args.train):
            parts = value["pair"] if isinstance(value, dict) and "pair" in value else [value]
            texts.extend(text_of(p) for p in parts)
        tok = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
        tok.train_from_iterator(
            texts,
            vocab_size=args.vocab_size,
            min_frequency=2,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            show_progress=False,
        )
        out_dir = args.out or args.dir
        os.makedirs(out_dir, exist_ok=True)
        tok.save_model(out_dir)
        write_regex_classes(os.path.join(out_dir, "regex_classes.txt"))
        print(f"tokenizers {tokenizers.__version__}: {tok.get_vocab_size()} tokens")
        args.dir = args.dir or out_dir
        if not args.input:
            return 0

    if not (args.dir and args.input and args.output):
        ap.error("--dir, --input and --output are required")
    from transformers.utils import logging

    logging.set_verbosity_error()  # "sequence longer than the model" warnings are expected
    values = read_lines(args.input)
    if args.all_modes:
        modes = [(f, p) for p in (0, 1) for f in (0, 1)]
    else:
        modes = [(args.fast, args.add_prefix_space)]
    for fast, prefix in modes:
        output = args.output
        if args.all_modes:
            output += ".%s%s" % ("fast" if fast else "slow", "_prefix" if prefix else "")
        encode(transformers, args, values, bool(fast), bool(prefix), output)
    return 0


def encode(transformers, args, values, fast, prefix, output):
    cls = transformers.RobertaTokenizerFast if fast else transformers.RobertaTokenizer
    tok = cls(
        os.path.join(args.dir, "vocab.json"),
        os.path.join(args.dir, "merges.txt"),
        add_prefix_space=prefix,
    )

    def limit(n):
        return {"truncation": True, "max_length": n} if n else {}

    out = []
    for value in values:
        if isinstance(value, dict) and "pair" in value:
            a, b = (text_of(p) for p in value["pair"])
            ids = tok(a, b, **limit(args.max_length_pairs))["input_ids"]
        else:
            ids = tok(text_of(value), **limit(args.max_length))["input_ids"]
        out.append(" ".join(str(i) for i in ids))
    with open(output, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(out) + ("\n" if out else ""))


if __name__ == "__main__":
    sys.exit(main())
