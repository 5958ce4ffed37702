#!/usr/bin/env python3
"""Reference ids from Hugging Face's slow BertTokenizer (or, with --fast 1, the fast
BertTokenizerFast of the `tokenizers` library), for the C++ WordPiece oracle test.

Input: one JSON value per line, either a string (the text) or {"hex": "..."} (raw bytes,
decoded as UTF-8 with errors="replace", which is how invalid input reaches the tokenizer).
Output: one line per input line, the space-separated `tokenizer(text)["input_ids"]`, i.e. with
[CLS] and [SEP]. With --max-length the ids are truncated to that length the way HF truncates.
--info prints `unicodedata.unidata_version` and exits, since the character classes HF uses
come from the running Python's Unicode database. Exits 77 when transformers (or, for --fast,
tokenizers) is missing.
"""
import argparse
import json
import sys
import unicodedata


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vocab")
    ap.add_argument("--lower", type=int, choices=(0, 1), default=1)
    ap.add_argument("--fast", type=int, choices=(0, 1), default=0)
    ap.add_argument("--input")
    ap.add_argument("--output")
    ap.add_argument("--max-length", type=int, default=0)
    ap.add_argument("--info", action="store_true")
    args = ap.parse_args()
    if args.info:
        print(unicodedata.unidata_version)
        return 0
    if not (args.vocab and args.input and args.output):
        ap.error("--vocab, --input and --output are required")

    try:
        import transformers  # late, so that --info works without it

        if args.fast:
            import tokenizers  # noqa: F401  BertTokenizerFast needs it
    except ImportError as e:
        print(f"cannot import transformers: {e}", file=sys.stderr)
        return 77  # "skipped", for the test that runs this script
    from transformers.utils import logging

    logging.set_verbosity_error()  # "sequence longer than the model" warnings are expected
    cls = transformers.BertTokenizerFast if args.fast else transformers.BertTokenizer
    tok = cls(args.vocab, do_lower_case=bool(args.lower), tokenize_chinese_chars=True)
    with open(args.input, "rb") as f:
        raw = f.read().decode("utf-8")
    out = []
    # Split on "\n" only: str.splitlines() would also split on U+2028, U+0085 and friends,
    # but JSON escapes every "\n" inside a value, so "\n" is the only record separator.
    for line in raw.split("\n"):
        if not line:
            continue
        value = json.loads(line)
        if isinstance(value, dict):
            text = bytes.fromhex(value["hex"]).decode("utf-8", errors="replace")
        else:
            text = value
        kwargs = {}
        if args.max_length:
            kwargs = {"truncation": True, "max_length": args.max_length}
        ids = tok(text, **kwargs)["input_ids"]
        out.append(" ".join(str(i) for i in ids))
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(out) + ("\n" if out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
