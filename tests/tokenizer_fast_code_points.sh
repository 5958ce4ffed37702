#!/usr/bin/env bash
# ctest-labels: integration;oracle
# Every code point through the fast mode (model.tokenizer_compat: fast): `tokenize
# --tokenizer-compat fast` on "x" + c + "y" for each code point c above ASCII (surrogates
# excepted; 1,111,936 lines) gives exactly HF BertTokenizerFast's ids, uncased and cased. The vocab
# (x, y, ##x, ##y, xy) makes nearly every class visible: a dropped or stripped c gives "xy", a space or
# punctuation or CJK c splits, a kept c makes the word [UNK]. The slow mode must differ from the
# fast tokenizer on some of these lines, or the check could not tell the modes apart.
# fast_char_classes.h's tables were measured this way; this keeps them honest.
# CI checks planes 0-3 and 14 whole (every block the two tokenizers classify differently lies
# there: CJK extensions to U+323AF, the newer marks and punctuation, the tags) and every 61st code
# point of the others (unassigned and private use; 338,397 lines, ~40 s);
# RINGMASTER_TOKENIZER_CODE_POINTS=all checks all 1,111,936 (~2 minutes on 2 cores).
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
"$PY" -c 'import transformers, tokenizers' 2>/dev/null ||
  { echo "SKIP: transformers or tokenizers not importable by $PY"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
# "x" U+11938 "y" too: the fast tokenizer does not decompose U+11938 (two spacing marks, so
# without the token the decomposed word would be [UNK] as well).
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\ny\n##x\n##y\nxy\nx\xf0\x91\xa4\xb8y\n' >vocab.txt
case ${RINGMASTER_TOKENIZER_CODE_POINTS:-sample} in
  all) want=1111936 ;;
  sample) want=338397 ;;
  *) fail "RINGMASTER_TOKENIZER_CODE_POINTS is all or sample, not '$RINGMASTER_TOKENIZER_CODE_POINTS'" ;;
esac
RINGMASTER_TOKENIZER_CODE_POINTS=${RINGMASTER_TOKENIZER_CODE_POINTS:-sample} "$PY" - <<'PY'
import os
from transformers import BertTokenizerFast
def wanted(c):
    if 0xD800 <= c <= 0xDFFF:
        return False
    if os.environ["RINGMASTER_TOKENIZER_CODE_POINTS"] == "all" or c >> 16 in (0, 1, 2, 3, 14):
        return True
    return (c - (0x40000 if c < 0xE0000 else 0xF0000)) % 61 == 0  # planes 4-13, 15-16
lines = ["x" + chr(c) + "y" for c in range(0x80, 0x110000) if wanted(c)]
with open("in.txt", "w", encoding="utf-8", newline="\n") as f:
    f.write("\n".join(lines) + "\n")
for lower in (1, 0):
    tok = BertTokenizerFast("vocab.txt", do_lower_case=bool(lower))
    with open(f"hf_{lower}.txt", "w") as f:
        for ids in tok(lines)["input_ids"]:
            f.write(" ".join(map(str, ids)) + "\n")
PY
n=$(wc -l <in.txt)
[[ $n -eq $want ]] || fail "$n input lines, not $want"
"$T" tokenize --vocab vocab.txt --tokenizer-compat fast <in.txt >ours_1.txt
"$T" tokenize --vocab vocab.txt --tokenizer-compat fast --cased <in.txt >ours_0.txt
"$T" tokenize --vocab vocab.txt --tokenizer-compat slow <in.txt >slow_1.txt
differ() { paste -d'|' "$1" "$2" | awk -F'|' '$1 != $2' | wc -l; }
for lower in 1 0; do
  d=$(differ "hf_$lower.txt" "ours_$lower.txt")
  if [[ $d -ne 0 ]]; then
    paste -d'|' "hf_$lower.txt" "ours_$lower.txt" | awk -F'|' '$1 != $2 { print NR": HF "$1" ours "$2 }' |
      head -5
    fail "lower=$lower: $d of $n lines differ from BertTokenizerFast"
  fi
done
s=$(differ hf_1.txt slow_1.txt)
[[ $s -gt 0 ]] || fail "the slow mode gives the fast tokenizer's ids on every line"
echo "ok   fast mode = BertTokenizerFast on all $n code points, uncased and cased; slow mode differs on $s"
