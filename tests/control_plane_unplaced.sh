#!/usr/bin/env bash
# ctest-labels: integration;serial
# A job that cannot be placed yet (nodes: 3 with 2 agents) is accepted and waits. `submit` says
# so at once: how many nodes are Ready against the job's minimum, until when it waits and how
# to cancel it; `status` and `submit --follow` show "waiting for 1 more node (2 of 3 Ready)";
# Ctrl-C on `submit --follow` says the job keeps running and how to cancel it.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 50 --dev 10 --seed 3 >/dev/null
fail() { echo "FAIL: $*"; cat "$work"/submit.* 2>/dev/null; cluster_logs; exit 1; }
cat >"$work/job.yaml" <<YAML
name: unplaced
model:
  config: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,
           max_position_embeddings: 48}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {max_steps: 2, global_batch_size: 8, micro_batch_size: 4}
output: {dir: out}
distributed: {nodes: 3, procs_per_node: 1}
YAML

start_coordinator
start_agent a0 --throughput off
start_agent a1 --throughput off
wait_until 30 "two Ready agents" ready_nodes 2 || fail "agents"

"$CP_CLI" submit "$work/job.yaml" >"$work/submit.out" 2>"$work/submit.err" || fail "submit failed"
id=$(head -1 "$work/submit.out")
note=$(cat "$work/submit.err")
echo "submit: $note"
for want in "job $id needs 3 nodes; the cluster has 2 Ready (of 2 registered)" \
  "it waits for 1 more node (2 of 3 Ready)" "join timeout" "ringmaster cancel $id"; do
  grep -qF "$want" <<<"$note" || fail "submit does not say '$want'"
done

joined() { "$CP_CLI" status "$id" | grep -q "waiting for 1 more node (2 of 3 Ready)"; }
wait_until 30 "status saying the job waits" joined || fail "status: $("$CP_CLI" status "$id")"
echo "status: $("$CP_CLI" status "$id" | grep '^nodes:')"
[[ $(job_field "$id" phase) == Rendezvous ]] || fail "the job is not waiting in Rendezvous"

"$CP_CLI" cancel "$id" >/dev/null

# --follow shows it too (the job never runs here: stop following with a signal).
wait_until 30 "two Ready agents again" ready_nodes 2 || fail "agents after the cancel"
timeout -s INT 5 "$CP_CLI" submit "$work/job.yaml" --follow >"$work/submit.follow" 2>&1 || true
"$CP_CLI" cancel "$(head -1 "$work/submit.follow")" >/dev/null || true
# No node has joined (a job takes nodes only once its minimum can start): 0/3, 2 of 3 Ready.
grep -q "Rendezvous  nodes 0/3  waiting for 1 more node (2 of 3 Ready)" "$work/submit.follow" ||
  fail "--follow does not show what the job waits for"
grep -q "stopped following; job job-[0-9]* keeps running (.ringmaster status job-[0-9]*.; .ringmaster cancel job-[0-9]*. stops it)" \
  "$work/submit.follow" || fail "Ctrl-C on --follow does not say the job keeps running"
echo "PASS"
