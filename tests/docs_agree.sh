#!/usr/bin/env bash
# ctest-labels: integration
# The docs against the code (issue #32: "one source of truth for what works"), no process
# started beyond `--help`:
#  - every `--flag` a doc line names after a binary (`ringmaster-trainer predict ... --flag`,
#    `ringmaster local ... --flag`, `ringmaster-agent ... --flag`, `ringmaster-coordinator ...`)
#    is listed by that binary's --help or one of its commands' --help;
#  - `ringmaster-trainer predict --help` says what predict reads and writes (CSV/JSONL inputs,
#    label names) as docs/trainer.md does;
#  - no stale claim about something that exists: each entry of `stale` below is a sentence that
#    was true once and is checked absent from README.md and docs/.
# (The job keys of docs/job-reference.md against the parser: jobspec/job_reference_test.cc.)
set -uo pipefail
src=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
b=${RINGMASTER_BINARY_DIR:?}
T=${TRAINER:-$b/trainer/ringmaster-trainer}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Every flag a binary knows: its --help and each command's (commands are the indented first
# words of the top-level help's "commands" section).
known_flags() {  # known_flags BINARY > flags
  local bin=$1
  "$bin" --help >"$work/top" 2>&1 || { echo "FAIL: $bin --help" >&2; return 1; }
  cat "$work/top"
  for c in $(sed -n '/^commands:/,/^$/p' "$work/top" | awk 'NR > 1 && /^  [a-z]/ {print $1}'); do
    "$bin" "$c" --help 2>&1
  done
}
declare -A binpath=(
  [ringmaster-trainer]=$T
  [ringmaster]=$b/cli/ringmaster
  [ringmaster-agent]=$b/agent/ringmaster-agent
  [ringmaster-coordinator]=$b/coordinator/ringmaster-coordinator
)
for name in "${!binpath[@]}"; do
  [[ -x ${binpath[$name]} ]] || { echo "FAIL: ${binpath[$name]} is not built"; exit 1; }
  known_flags "${binpath[$name]}" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u >"$work/flags.$name"
  n=$(wc -l <"$work/flags.$name")
  ((n >= 3)) || bad "$name: only $n flags found in its --help"
done
"${binpath[ringmaster]}" --help 2>&1 | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && /^  [a-z]/ {print $1}' \
  >"$work/commands.ringmaster"

# The flags each doc line names after a binary: the line is cut at each binary name, and the
# flags of a piece belong to the binary that starts it. A piece ends at the end of its code span
# or at a '|' (a shell pipe or a table cell).
python3 - "$src" "$work" <<'PY' || fail=1
import pathlib, re, sys
src, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
names = ["ringmaster-trainer", "ringmaster-coordinator", "ringmaster-agent", "ringmaster"]
known = {n: set((work / f"flags.{n}").read_text().split()) for n in names}
commands = set((work / "commands.ringmaster").read_text().split())
# A binary's name where a command starts: at the start, after a space, '`', '(' or '$', or as
# the last part of a path (build/cli/ringmaster); not inside a word, path or image name.
binre = re.compile(r"(?:^|(?<=[\s`($])|(?<=/))(ringmaster-trainer|ringmaster-coordinator|"
                   r"ringmaster-agent|ringmaster)(?![\w./:-])")
docs = [src / "README.md"] + sorted((src / "docs").glob("*.md"))
bad = checked = 0
for doc in docs:
    lines = doc.read_text().splitlines()
    lineno = 0
    while lineno < len(lines):
        start = lineno + 1
        line = lines[lineno]
        while line.endswith("\\") and lineno + 1 < len(lines):  # a shell continuation
            lineno += 1
            line = line[:-1] + " " + lines[lineno]
        lineno += 1
        hits = list(binre.finditer(line))
        for i, m in enumerate(hits):
            name = m.group(1)
            before = line[: m.start()]
            if before.endswith("/") and not re.search(r"(^|[\s`(])(\.?/?[\w.-]+/)*(cli|agent|coordinator|trainer|bin)/$", before):
                continue  # /var/lib/ringmaster, helm/ringmaster: a path, not the binary
            if re.search(r"(^|\s)-[\w-]*[ =]\S*$", before):
                continue  # an option's value (--trainer /usr/bin/ringmaster-trainer, -n ringmaster)
            end = hits[i + 1].start() if i + 1 < len(hits) else len(line)
            piece = re.split(r"[`|]", line[m.end():end])[0]
            # The bare CLI name runs a command: `ringmaster local --nodes 2`, `ringmaster --help`.
            if name == "ringmaster":
                first = piece.split()[:1]
                at_start = before.strip() == "" or before.endswith(("`", "/", "$ "))
                if not first or not (first[0] in commands or
                                     (first[0].startswith("--") and at_start)):
                    continue
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", piece):
                checked += 1
                if flag not in known[name]:
                    print(f"FAIL: {doc.relative_to(src)}:{start}: {name} {flag}: not in its --help")
                    bad += 1
print(f"{'ok  ' if bad == 0 else 'FAIL'} {checked} flags named after a binary in {len(docs)} docs, {bad} unknown")
if checked < 30:
    print("FAIL: too few flags found: the doc scan is broken")
    bad += 1
sys.exit(1 if bad else 0)
PY

# predict's help against what predict does (docs/trainer.md, "predict").
"$T" predict --help >"$work/predict" 2>&1
grep -q 'CSV' "$work/predict" && grep -q 'JSONL' "$work/predict" ||
  bad "predict --help does not say it reads CSV and JSONL: $(grep -A2 -- '--input' "$work/predict")"
grep -qi 'label id, then' "$work/predict" && bad "predict --help says it prints the label id only"

# Stale claims: sentences once true, now wrong. Each is a fixed string (grep -F) and the reason.
stale=(
  "is refused until the CUDA trainer lands|docs/trainer.md: the CUDA engine exists (train.device cuda)"
  "gradient checkpointing and the fast tokenizer's behaviour as an|README.md: train.gradient_checkpointing and model.tokenizer_compat work (#21)"
  "not used yet: progress lines come every 10 s|docs/job-reference.md: train.log_every_steps is honoured"
)
for entry in "${stale[@]}"; do
  text=${entry%%|*}
  why=${entry#*|}
  if hits=$(grep -rnF -- "$text" "$src/README.md" "$src/docs"); then
    bad "stale claim ($why): $hits"
  fi
done
[[ $fail -eq 0 ]] && echo "ok   ${#stale[@]} stale claims absent; predict --help names its formats"
exit $fail
