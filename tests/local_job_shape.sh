#!/usr/bin/env bash
# ctest-labels: integration;serial
# `ringmaster local` runs a job with the job's own distributed.nodes and procs_per_node (here 2
# nodes x 1 process: world 2), unless --nodes / --procs-per-node are given; then it says which of
# the job's values a flag overrides. Off a terminal, --follow's progress is one line per update:
# no step is printed twice.
set -euo pipefail
T=${TRAINER:?}
B=${RINGMASTER_BINARY_DIR:?}
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 400 --dev 20 --seed 3 >/dev/null
fail() { echo "FAIL: $*"; cat "$work/$name.out" "$work/$name.err"; exit 1; }

cat >"$work/job.yaml" <<YAML
name: local-shape
model:
  config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {max_steps: 600, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3, seed: 3}
output: {dir: out, checkpoint_every_steps: 0}
distributed: {nodes: 2, procs_per_node: 1}
YAML

export RINGMASTER_COLLECTIVE_TIMEOUT_S=120
local_run() {  # $1 = name, rest = flags
  name=$1
  shift
  rm -rf "$work/out"
  timeout 600 "$CLI" local "$work/job.yaml" --trainer "$T" "$@" >"$work/$name.out" 2>"$work/$name.err" ||
    fail "ringmaster local $* did not succeed"
  grep -q "Succeeded  step 600/600" "$work/$name.out" || fail "no final Succeeded line"
  # One line per update: no step shown on two lines.
  dups=$(grep -o 'Running  step [0-9]*/600' "$work/$name.out" | sort | uniq -d || true)
  [[ -z $dups ]] || fail "progress printed twice: $dups"
}

local_run job
# Two ranks report at different moments: the run that could repeat a step. Enough lines to judge?
[[ $(grep -c 'Running  step' "$work/job.out") -ge 3 ]] || fail "too few progress lines to judge"
grep -q "world 2" "$work/job.out" || fail "the job's 2 nodes x 1 process did not give world 2"
grep -q "world 1" "$work/job.out" && fail "ran at world 1"
grep -q "overrides" "$work/job.err" && fail "an override reported without a flag"
grep -q "on 2 node(s) x 1 process(es) per node (the job's distributed settings)" "$work/job.err" ||
  fail "the job's shape not said"
echo "ok   no flags: the job's 2 nodes x 1 process, world 2"

local_run flag --nodes 1
grep -q "world 1" "$work/flag.out" || fail "--nodes 1 did not give world 1"
grep -q "ringmaster local: --nodes 1 overrides the job's distributed.nodes 2" "$work/flag.err" ||
  fail "the override is not said"
echo "ok   --nodes 1: world 1, said: $(grep overrides "$work/flag.err")"
echo "PASS"
