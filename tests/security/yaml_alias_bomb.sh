#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 3: YAML aliases exhausted the coordinator's memory with nothing but a submit
# token. `labels: [&a "<200 KB>", *a, ...]` with 1,000 aliases (a 204 KB job file) took the
# coordinator from 20 to 812 MB in 5.5 s: yaml-cpp shares the anchored node, but the spec reader
# copied it once per alias (a 1 MiB file could ask for ~64 GB). The aliases must count by the
# bytes they expand to: the submit is refused naming the file and line, the coordinator's peak
# RSS (VmHWM) grows by less than 64 MB, and a job using an ordinary alias is still accepted.
# Before the fix the coordinator's peak grew by ~800 MB and no error named the aliases.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
start_coordinator
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$COORD_PID/status"; }

# The bomb: a valid job whose data.labels is one 200 KB string and 1,000 aliases of it.
tiny_job "$work"
python3 - "$work/job.yaml" "$work/bomb.yaml" <<'PY'
import sys
job = open(sys.argv[1]).read()
labels = "[&a \"%s\"%s]" % ("x" * 200 * 1024, ", *a" * 1000)
job = job.replace("max_seq_len: 32,", "max_seq_len: 32, labels: %s," % labels)
assert "labels: [&a" in job
open(sys.argv[2], "w").write(job)
PY
line=$(grep -n 'labels: \[&a' "$work/bomb.yaml" | cut -d: -f1)
echo "bomb.yaml: $(stat -c %s "$work/bomb.yaml") bytes, the aliases on line $line"

before=$(hwm_kb)
rc=0
(cd "$work" && "$CP_CLI" submit bomb.yaml) >"$work/submit.out" 2>&1 || rc=$?
after=$(hwm_kb)
head -c 400 "$work/submit.out"
echo
grow_mb=$(((after - before) / 1024))
echo "coordinator VmHWM: $((before / 1024)) MB before the submit, $((after / 1024)) MB after (+$grow_mb MB)"
kill -0 "$COORD_PID" 2>/dev/null || fail "the coordinator died"
((rc != 0)) || fail "the alias bomb was accepted"
grep -q "bomb.yaml:$line:[0-9]*: YAML aliases expand the job spec to more than 4194304 bytes" \
  "$work/submit.out" || fail "the refusal does not name the file, the line and the alias limit"
((grow_mb < 64)) || fail "the coordinator's peak memory grew by $grow_mb MB"
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "the refused job was stored: $("$CP_CLI" list)"

# An ordinary alias still works: the eval set named once and reused.
sed -e 's|train: data/train.tsv, eval: data/dev.tsv|train: \&t data/train.tsv, eval: *t|' \
  "$work/job.yaml" >"$work/alias.yaml"
grep -q 'eval: \*t' "$work/alias.yaml" || fail "alias.yaml was not rewritten"
(cd "$work" && "$CP_CLI" submit alias.yaml) >"$work/ok.out" 2>&1 || fail "a job with one alias was refused: $(cat "$work/ok.out")"
echo "refused the alias bomb (+$grow_mb MB peak); a job with one alias accepted"
echo "yaml_alias_bomb: 1 passed, 0 failed"
