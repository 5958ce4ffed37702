#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 1 (and the terminal part of finding 10): a byte that is not UTF-8 in a
# trainer's error line must not wedge the node. A job whose init_from model has config.json =
# the bytes \xff\xfe{ makes the trainer's error quote them raw. Before the fix the agent put that
# line in a protobuf `string` field, the coordinator could not parse the report and dropped the
# stream, and the agent registered again ~390 times a second (tens of thousands of "registered
# again" lines, megabytes of logs) while the job stayed Running at step 0 and the next job waited.
# Now, through a real coordinator and agent:
#   1. that job (and one whose model.safetensors header starts with those bytes) fails at once
#      (exit 3 before the first step), its error showing the byte it quotes escaped
#      ("last read: '\xff'"), never raw, in `ringmaster status` and in `ringmaster logs`;
#   2. no raw ESC, CR or invalid UTF-8 reaches the terminal either from a label with ESC and CR
#      that the trainer echoes (status and logs) or from the spec error for a job file key
#      holding them (submit): escaped instead;
#   3. the node keeps serving: the next (valid, tiny) job runs to Succeeded on it;
#   4. the logs stay small: "registered again" at most twice, each log under 256 KiB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
start_coordinator --last-call 1s
start_agent a --throughput off
wait_until 30 "agent a to be Ready" ready_nodes 1 || fail "agent a did not register"

# raw_bytes FILE: succeeds when FILE holds ESC, CR or a byte that is not valid UTF-8.
raw_bytes() {
  LC_ALL=C grep -q $'[\x1b\r]' "$1" && return 0
  ! iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1
}

tiny_job "$work"
# fails_escaped NAME PATTERN...: submits $work/NAME.yaml; the job must fail within 60 s (before
# the fix the first one never ended: bounded, so that the old code fails instead of hanging), and
# both `ringmaster status` and `ringmaster logs` of its rank 0 must show each PATTERN (the
# offending bytes escaped) and no raw ESC, CR or invalid UTF-8.
fails_escaped() {
  local name=$1 id p out
  shift
  id=$(cd "$work" && "$CP_CLI" submit "$name.yaml") || fail "$name: the job was not accepted"
  wait_until 60 "job $id ($name) to end" job_ended "$id" ||
    fail "$name: job $id did not end: the node is wedged ($(grep -c 'registered again' "$work/coordinator.log") 'registered again' lines)"
  "$CP_CLI" status "$id" >"$work/$name.status"
  cat -v "$work/$name.status"
  [[ $(job_field "$id" phase) == Failed ]] || fail "$name: job $id is not Failed"
  "$CP_CLI" logs "$id" --rank 0 >"$work/$name.log" 2>&1 || fail "$name: ringmaster logs failed"
  for out in status log; do
    for p in "$@"; do
      grep -qF "$p" "$work/$name.$out" || fail "$name: ringmaster $out does not show: $p"
    done
    raw_bytes "$work/$name.$out" && fail "$name: ringmaster $out printed raw control or non-UTF-8 bytes"
  done
  echo "$name: job $id Failed; status and logs show: $*"
}

# ---- 1. models whose config.json, or safetensors header, is the bytes \xff\xfe{
model_job() {  # NAME DIR: the tiny job with model.init_from DIR
  sed -e "s|^  config: .*|  init_from: $2|" -e '/^           max_position_embeddings/d' \
    -e '/^  vocab:/d' -e "s|^name: .*|name: $1|" "$work/job.yaml" >"$work/$1.yaml"
  grep -q "init_from: $2" "$work/$1.yaml" || fail "$1.yaml was not written"
}
mkdir -p "$work/evil" "$work/evil-st"
printf '\xff\xfe{' >"$work/evil/config.json"
cp "$work/data/vocab.txt" "$work/evil/vocab.txt"
printf 'x' >"$work/evil/model.safetensors"
model_job evil-config evil
fails_escaped evil-config "evil/config.json: invalid JSON" "last read: '\\xff'"
cp "$work/data/vocab.txt" "$work/evil-st/vocab.txt"
cat >"$work/evil-st/config.json" <<JSON
{"model_type": "bert", "vocab_size": $(wc -l <"$work/data/vocab.txt"), "hidden_size": 32,
 "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
 "max_position_embeddings": 64, "type_vocab_size": 2}
JSON
# safetensors: an 8-byte little-endian header length (3), then the header.
printf '\x03\x00\x00\x00\x00\x00\x00\x00\xff\xfe{' >"$work/evil-st/model.safetensors"
model_job evil-safetensors evil-st
fails_escaped evil-safetensors "evil-st/model.safetensors: header is not valid JSON" \
  "last read: '\\xff'"

# ---- 2. a label the trainer echoes (ESC and CR in a data file), a key in a job file
cp "$work/data/train.tsv" "$work/esc-label.tsv"
printf 'some text\t\x1b[2J\rX\n' >>"$work/esc-label.tsv"
sed -e 's|train: data/train.tsv|train: esc-label.tsv|' -e 's|^name: .*|name: esc-label|' \
  "$work/job.yaml" >"$work/esc-label.yaml"
fails_escaped esc-label 'label "\x1b[2J\rX" is not an integer'

# A key holding ESC and CR (YAML's double-quoted "\e" and "\r"): the error quotes it.
{ cat "$work/job.yaml"; printf '"bogus\\e[2J\\r": 1\n'; } >"$work/esc.yaml"
if (cd "$work" && "$CP_CLI" submit esc.yaml) >"$work/esc.out" 2>&1; then
  fail "a job file with an unknown key was accepted"
fi
cat -v "$work/esc.out"
grep -qF '\x1b[2J' "$work/esc.out" || fail "the submit error does not show ESC escaped"
raw_bytes "$work/esc.out" && fail "the submit error printed raw ESC or CR"
echo "submit: the spec error shows ESC and CR escaped"

# ---- 3. the node keeps serving: the tiny job runs to success on it
tiny=$(cd "$work" && "$CP_CLI" submit job.yaml) || fail "the tiny job was not accepted"
wait_until 120 "job $tiny to end" job_ended "$tiny" || fail "job $tiny did not end"
[[ $(job_field "$tiny" phase) == Succeeded ]] || fail "job $tiny is not Succeeded: $(job_field "$tiny" error)"
echo "job $tiny: Succeeded on the same node"

# ---- 4. bounded logs
again=$(grep -c 'registered again' "$work/coordinator.log" || true)
((again <= 2)) || fail "'registered again' appears $again times in the coordinator's log"
for f in coordinator.log a.log; do
  size=$(stat -c %s "$work/$f")
  ((size < 262144)) || fail "$f is $size bytes"
  echo "$f: $size bytes"
done
echo "'registered again': $again times"
echo "non_utf8_error_line: passed"
