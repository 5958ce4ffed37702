#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# A rank frozen with SIGSTOP (alive, holding its sockets, but stuck) in a 2-node job: within the
# collective timeout `ringmaster status` must name it as the rank that has not entered the
# collective the other rank is waiting in, and the coordinator's /metrics must flag it
# (ringmaster_job_stall_missing_rank) while the other rank's agent shows its rank inside a
# collective. After SIGCONT the stall clears and the job completes without a restart (nothing
# was lost).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'kill -CONT "${frozen:-0}" 2>/dev/null || true; cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cat >"$work/job.yaml" <<YAML
name: sigstop-test
model:
  config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48}
train: {epochs: 100, max_steps: 1500, global_batch_size: 16, micro_batch_size: 8, lr: 1.0e-3,
        warmup_steps: 2, seed: 3}
output: {dir: out, checkpoint_every_steps: 0}
distributed: {sharding: no_shard, nodes: "2:2", procs_per_node: 1}
restart: {max_restarts: 3}
YAML

timeout_s=60
export RINGMASTER_SLOWDOWN=4 RINGMASTER_COLLECTIVE_TIMEOUT_S=$timeout_s OMP_NUM_THREADS=1
cport=$(free_port)
aport=$(free_port)
start_coordinator --lost-after 10s --last-call 1s --stall-after 2s --metrics-listen "127.0.0.1:$cport"
start_agent a0 --throughput off --metrics-listen "127.0.0.1:$aport"
start_agent a1 --throughput off
on_fail() { echo "FAIL: $*"; "$CP_CLI" status "${id:-}" || true; cluster_logs; exit 1; }
two_ready() { [[ $("$CP_CLI" nodes | grep -c Ready) -eq 2 ]]; }
wait_until 30 "two ready agents" two_ready || on_fail "agents"
id=$("$CP_CLI" submit "$work/job.yaml")
echo "job $id"
step_now() { job_field "$id" progress | sed -n 's/^step \([0-9]*\)\/.*/\1/p'; }
stepping() { [[ $(job_field "$id" phase) == Running ]] && (($(step_now) >= 3)); }
wait_until 90 "steps" stepping || on_fail "the job never reached step 3"

# Rank 1 runs on whichever agent the planner chose; its process is the trainer whose job file
# lies under that agent's work dir and whose environment says RANK=1.
frozen=""
for p in $(pgrep -f "ringmaster-trainer train --config $work/" || true); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1'; then frozen=$p; fi
done
[[ -n $frozen ]] || on_fail "no process of rank 1"
kill -STOP "$frozen"
t0=$SECONDS
names_rank1() { "$CP_CLI" status "$id" | grep -q '^stalled: *rank(s) 1 have not entered collective #'; }
wait_until "$timeout_s" "stall naming rank 1" names_rank1 || on_fail "rank 1 not named within ${timeout_s}s"
detect=$((SECONDS - t0))
line=$("$CP_CLI" status "$id" | grep '^stalled:')
echo "named after ${detect}s (collective timeout ${timeout_s}s): $line"
grep -q 'ranks\? 0 waiting' <<<"$line" || on_fail "the waiting rank is not rank 0: $line"
((detect < timeout_s)) || on_fail "detection took ${detect}s"

page=$(curl -sf "http://127.0.0.1:$cport/metrics")
grep -q "^ringmaster_job_stall_missing_rank{[^}]*rank=\"1\"[^}]*} 1" <<<"$page" ||
  on_fail "coordinator /metrics does not flag rank 1: $(grep stall <<<"$page")"
if grep -q "^ringmaster_job_stall_missing_rank{[^}]*rank=\"0\"" <<<"$page"; then
  on_fail "coordinator /metrics flags rank 0 too"
fi
stall_s=$(sed -n 's/^ringmaster_job_stall_seconds{[^}]*} \(.*\)/\1/p' <<<"$page")
awk -v s="${stall_s:-0}" 'BEGIN { exit !(s >= 2) }' || on_fail "stall seconds '$stall_s' < --stall-after"
# Agent a0's page: if it runs rank 0, rank 0 is inside a collective; rank 1's gauge is frozen.
apage=$(curl -sf "http://127.0.0.1:$aport/metrics")
promtool check metrics <<<"$apage" || on_fail "promtool rejects the agent's /metrics"
promtool check metrics <<<"$page" || on_fail "promtool rejects the coordinator's /metrics"
if grep -q 'ringmaster_trainer_in_collective{[^}]*rank="0"' <<<"$apage"; then
  grep -q '^ringmaster_trainer_in_collective{[^}]*rank="0"} 1' <<<"$apage" ||
    on_fail "agent a0 does not show rank 0 inside a collective"
fi

kill -CONT "$frozen"
frozen=""
cleared() { ! "$CP_CLI" status "$id" | grep -q '^stalled:'; }
wait_until 30 "the stall to clear" cleared || on_fail "stall not cleared after SIGCONT"
done_ok() { [[ $(job_field "$id" phase) == Succeeded ]]; }
wait_until 180 "success" done_ok || on_fail "the job did not succeed after SIGCONT"
restarts=$(job_field "$id" restarts)
[[ $restarts == 0/3 ]] || on_fail "restarts $restarts (SIGSTOP must not cost a restart)"
echo "PASS: rank 1 named in ${detect}s, job completed with restarts $restarts"
