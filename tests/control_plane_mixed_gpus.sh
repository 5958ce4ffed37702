#!/usr/bin/env bash
# ctest-labels: integration;serial
# Mixed GPU generations: two agents report overridden inventories (a Tesla P40 and an A100) and
# one of them is deliberately slowed 4x (RINGMASTER_SLOWDOWN, a stand-in for the slower card).
# Each agent measures its trainer's throughput once at registration (`ringmaster-trainer probe`,
# cached in its work dir); the coordinator then gives each rank a share of every global batch
# proportional to that figure. Checks: the slowed node measured slower, the fast rank gets the
# larger share (ratio within the measured speed ratio's neighbourhood), the probe is cached (a
# restarted agent does not probe again), the job's final weights equal a single-process run on
# the same global batch (uneven shares, exact gradient: per-sample loss weighting), and
# `ringmaster logs` fetches a rank's log from its agent.
set -euo pipefail
T=${TRAINER:?}
PY=${RINGMASTER_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
"$T" gen-data --out "$work/data" --train 240 --dev 40 --seed 9 >/dev/null
job() {  # $1 = output dir
  cat >"$work/$1.yaml" <<YAML
name: mixed-gpus
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 48, shuffle: true}
train: {epochs: 1, max_steps: 8, global_batch_size: 40, micro_batch_size: 40, lr: 2.0e-3,
        warmup_steps: 2, seed: 13, max_grad_norm: 0.5}
output: {dir: $1, checkpoint_every_steps: 0}
distributed: {sharding: no_shard, compression: none, nodes: 2, procs_per_node: 1}
YAML
  echo "$work/$1.yaml"
}
"$T" train --config "$(job ref)" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
fail=0
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }

export OMP_NUM_THREADS=1 RINGMASTER_COLLECTIVE_TIMEOUT_S=60
start_coordinator --lost-after 5s --last-call 1s
speed_of() { "$CP_CLI" nodes | awk -v n="$1" '$1 == n && $7 != "-" { print $7 }'; }
registered() { [[ -n $(speed_of "$1") ]]; }
# One at a time, so that the two probes do not share the CPU.
RINGMASTER_SLOWDOWN=4 start_agent p40 --inventory-override '1xTesla P40:sm_61:24GiB'
wait_until 120 "p40 registered with a throughput" registered p40 || on_fail "p40 did not report a throughput"
start_agent a100 --inventory-override '1xNVIDIA A100-SXM4-40GB:sm_80:40GiB'
wait_until 120 "a100 registered with a throughput" registered a100 || on_fail "a100 did not report a throughput"
"$CP_CLI" nodes
slow=$(speed_of p40) fast=$(speed_of a100)
ratio=$(awk -v f="$fast" -v s="$slow" 'BEGIN { printf "%.2f", f / s }')
if awk -v r="$ratio" 'BEGIN { exit !(r >= 2 && r <= 8) }'; then
  echo "ok   measured throughput a100 $fast / p40 $slow samples/s = $ratio (slowdown 4)"
else
  echo "FAIL measured throughput ratio $ratio, expected about 4 (2..8)"; fail=1
fi

id=$("$CP_CLI" submit "$(job out)")
wait_until 300 "the job to end" bash -c "[[ \$('$CP_CLI' status $id | sed -n 's/^phase: *//p') =~ Succeeded|Failed|Cancelled ]]" ||
  on_fail "the job did not end"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
share() {  # samples per global batch the rank on node $1 took
  sed -n 's/.*rank [0-9]* takes \([0-9]*\) of every 40 samples.*/\1/p' "$work/$1"/jobs/"$id"/gen-0/rank-*.log
}
s_slow=$(share p40) s_fast=$(share a100)
echo "shares of a 40-sample global batch: a100 $s_fast, p40 $s_slow"
expect_fast=$(awk -v r="$ratio" 'BEGIN { printf "%d", 40 * r / (1 + r) + 0.5 }')
if [[ -n $s_fast && -n $s_slow ]] && ((s_fast + s_slow == 40)) &&
  ((s_fast >= expect_fast - 1 && s_fast <= expect_fast + 1)); then
  echo "ok   shares follow the measured speeds (expected a100 ~$expect_fast)"
else
  echo "FAIL shares a100 '$s_fast' p40 '$s_slow', expected a100 ~$expect_fast of 40"; fail=1
fi
if out=$("$PY" "$here/lib/compare_weights.py" "$work/out/final/model.safetensors" \
  "$work/ref/final/model.safetensors" 2e-6 1e-4); then
  echo "ok   uneven shares vs one process: $out"
else
  echo "FAIL uneven shares vs one process: $out"; fail=1
fi

# Log transfer: rank 1's log, fetched through the coordinator from its agent.
if "$CP_CLI" logs "$id" --rank 1 >"$work/rank1.txt" 2>"$work/rank1.err" &&
  grep -q "rank 1 takes $s_slow of every 40 samples" "$work/rank1.txt"; then
  echo "ok   ringmaster logs --rank 1 returned the rank's log ($(wc -c <"$work/rank1.txt") bytes)"
else
  echo "FAIL ringmaster logs --rank 1"; cat "$work/rank1.err"; fail=1
fi
if "$CP_CLI" logs "$id" --rank 5 >/dev/null 2>"$work/rank5.err"; then
  echo "FAIL logs of a rank that does not exist succeeded"; fail=1
fi

# A restarted agent reuses its measurement.
kill -TERM "${AGENT_PID[p40]}"
wait "${AGENT_PID[p40]}" || true
RINGMASTER_SLOWDOWN=4 start_agent p40 --inventory-override '1xTesla P40:sm_61:24GiB'
wait_until 60 "p40 registered again" bash -c "grep -c 'registered as node' '$work/p40.log' | grep -qx 2"
if grep -q "samples/s (cached)" "$work/p40.log"; then
  echo "ok   restarted agent reused its cached throughput"
else
  echo "FAIL restarted agent probed again"; fail=1
fi
((fail == 0)) || cluster_logs
exit $fail
