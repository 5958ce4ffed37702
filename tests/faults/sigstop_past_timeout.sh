#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# A rank frozen with SIGSTOP and left frozen (docs/reliability.md, "Fault scenarios"): unlike
# tests/hang_diagnosis_sigstop.sh, nobody sends SIGCONT. Two agents, one CPU rank each, a
# collective timeout of 8 s. Expected:
#  - the other rank's collective times out (not earlier than the timeout: nothing else can
#    tell a stuck rank from a slow one) and the job restarts; the failure the coordinator
#    records names rank 1 as the rank that had not entered the collective, and as stopped;
#  - the frozen process is gone within a few seconds of the stop command (SIGCONT follows
#    SIGTERM), not after the 30 s grace period;
#  - the next generation resumes from the newest checkpoint committed before the freeze (no
#    committed step lost) and the job succeeds with 1 restart;
#  - its losses and final weights equal an uninterrupted single-process run (the tolerance of
#    tests/control_plane_kill.sh: fp32 summation order at world sizes 2 and 1).
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'kill -KILL "${frozen:-0}" 2>/dev/null || true; cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null

steps=32
job() {  # $1 = output dir
  cat >"$work/$1.yaml" <<YAML
name: sigstop-timeout
model:
  config: {hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 128,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 3, max_steps: $steps, global_batch_size: 16, micro_batch_size: 8, lr: 2.0e-3,
        warmup_steps: 2, seed: 11, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 4, keep_checkpoints: 100}
distributed: {sharding: no_shard, nodes: "2:2", procs_per_node: 1}
restart: {max_restarts: 3}
YAML
  echo "$work/$1.yaml"
}
"$T" train --config "$(job ref)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }

timeout_s=8
export RINGMASTER_SLOWDOWN=20 RINGMASTER_COLLECTIVE_TIMEOUT_S=$timeout_s OMP_NUM_THREADS=1
start_coordinator --lost-after 10s --last-call 1s --stall-after 2s
start_agent a0 --throughput off
start_agent a1 --throughput off
two_ready() { [[ $("$CP_CLI" nodes | grep -c Ready) -eq 2 ]]; }
wait_until 30 "two ready agents" two_ready
id=$("$CP_CLI" submit "$(job out)")
echo "job $id"
fail=0
on_fail() { echo "FAIL: $*"; "$CP_CLI" status "${id:-}" || true; cluster_logs; exit 1; }
committed_at_least() { (($(committed_step "$work/out") >= $1)); }
wait_until 120 "a checkpoint at step 8" committed_at_least 8 || on_fail "no progress"

frozen=""
for p in $(pgrep -f "ringmaster-trainer train --config $work/a.*/jobs/$id/gen-0/" || true); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1'; then frozen=$p; fi
done
[[ -n $frozen ]] || on_fail "no process of rank 1"
kill -STOP "$frozen"
t0=$SECONDS
c=$(committed_step "$work/out")
echo "froze rank 1 (pid $frozen) with step $c committed; collective timeout ${timeout_s}s"

restarted() { [[ $(job_field "$id" restarts) == 1/3 ]]; }
wait_until $((timeout_s + 30)) "a restart" restarted || on_fail "no restart after the collective timeout"
detect=$((SECONDS - t0))
issue=$("$CP_CLI" status "$id" | sed -n 's/^last issue: *//p')
echo "restart recorded ${detect}s after the freeze: $issue"
# Not before the timeout (a whole second of slack for the poll and the rounding of SECONDS).
((detect >= timeout_s - 1)) || { echo "FAIL: restarted after ${detect}s, before the ${timeout_s}s timeout"; fail=1; }
grep -q "that rank(s) 1 had not entered; rank(s) 1 stopped (SIGSTOP)" <<<"$issue" ||
  { echo "FAIL: the recorded failure does not name the stopped rank 1"; fail=1; }
grep -q "before the failure, rank(s) 0 waited inside collective #" <<<"$issue" ||
  { echo "FAIL: the recorded failure does not name rank 0 as waiting"; fail=1; }

gone() { ! kill -0 "$frozen" 2>/dev/null || [[ $(ps -o stat= -p "$frozen") == Z* ]]; }
wait_until 15 "the frozen rank to end" gone ||
  { echo "FAIL: the frozen rank was still there 15 s after the restart (grace is 30 s)"; fail=1; }
echo "     frozen rank gone $((SECONDS - t0))s after the freeze"

wait_until 60 "generation 1 to resume" bash -c "grep -qs 'resumed from' $work/a*/jobs/$id/gen-1/rank-0.log" ||
  on_fail "generation 1 did not resume from a checkpoint"
k=$(sed -n 's/.*resumed from .* (step \([0-9]*\),.*/\1/p' "$work"/a*/jobs/"$id"/gen-1/rank-0.log | head -1)
if ((k >= c)); then
  echo "ok   generation 1 resumed from step $k (committed before the freeze: $c)"
else
  echo "FAIL generation 1 resumed from step $k, older than committed step $c"; fail=1
fi

ended() { [[ $(job_field "$id" phase) =~ Succeeded|Failed|Cancelled ]]; }
wait_until 300 "the job to end" ended || on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
[[ $(job_field "$id" restarts) == 1/3 ]] || { echo "FAIL: restarts $(job_field "$id" restarts), expected 1/3"; fail=1; }
if out=$("$PY" "$here/lib/compare_losses.py" "$work/out/metrics.jsonl" "$work/ref/metrics.jsonl" "$steps"); then
  echo "ok   losses vs uninterrupted run: $out"
else
  echo "FAIL losses vs uninterrupted run: $out"; fail=1
fi
if out=$("$PY" "$here/lib/compare_weights.py" "$work/out/final/model.safetensors" \
  "$work/ref/final/model.safetensors" 5e-5 1e-4); then
  echo "ok   final weights vs uninterrupted run: $out"
else
  echo "FAIL final weights vs uninterrupted run: $out"; fail=1
fi
((fail == 0)) || cluster_logs
exit $fail
