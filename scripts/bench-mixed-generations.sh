#!/usr/bin/env bash
# Mixed GPU generations on one CPU machine: a "P40" agent slowed 4x (RINGMASTER_SLOWDOWN=4) and an
# "A100" agent, one rank each, run the same job twice:
#   equal   -- both agents --throughput off: equal shares, what torchrun/DeepSpeed do;
#   weighted -- both agents probe their trainer at registration: shares follow the speeds.
# Prints the measured probe figures, each run's shares, median step time and wall time.
#   scripts/bench-mixed-generations.sh [STEPS]      (default 30; build first)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RINGMASTER_BINARY_DIR=${RINGMASTER_BINARY_DIR:-$ROOT/build}
export TRAINER=${TRAINER:-$RINGMASTER_BINARY_DIR/trainer/ringmaster-trainer}
steps=${1:-30}
# shellcheck source=../tests/lib/cluster.sh
source "$ROOT/tests/lib/cluster.sh"
top=$(mktemp -d)
trap 'cluster_stop; rm -rf "$top"' EXIT
"$TRAINER" gen-data --out "$top/data" --train 2000 --dev 40 --seed 9 >/dev/null
cat >"$top/job.yaml" <<YAML
name: bench-mixed
model:
  config: {hidden_size: 128, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 512,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 64, shuffle: true}
train: {epochs: 1, max_steps: $steps, global_batch_size: 64, micro_batch_size: 64, lr: 5.0e-4, seed: 1}
output: {dir: out, checkpoint_every_steps: 0}
distributed: {sharding: no_shard, compression: none, nodes: 2, procs_per_node: 1}
YAML
export OMP_NUM_THREADS=1 RINGMASTER_COLLECTIVE_TIMEOUT_S=120

run() {  # $1 = equal|weighted
  local mode=$1 tp=off
  [[ $mode == weighted ]] && tp=auto
  cluster_init "$top/$mode"
  mkdir -p "$top/$mode"
  cp "$top/job.yaml" "$top/$mode/job.yaml"
  ln -s "$top/data" "$top/$mode/data"
  start_coordinator --last-call 1s
  RINGMASTER_SLOWDOWN=4 start_agent p40 --inventory-override '1xTesla P40:sm_61:24GiB' --throughput $tp
  wait_until 120 "p40" bash -c "'$CP_CLI' nodes | grep -q '^p40 '"
  start_agent a100 --inventory-override '1xNVIDIA A100-SXM4-40GB:sm_80:40GiB' --throughput $tp
  wait_until 120 "a100" bash -c "'$CP_CLI' nodes | grep -q '^a100 '"
  [[ $mode == weighted ]] && "$CP_CLI" nodes
  local id t0 t1
  id=$("$CP_CLI" submit "$top/$mode/job.yaml")
  t0=$(date +%s.%N)
  wait_until 1200 "the job to end" bash -c "'$CP_CLI' status $id | grep -Eq '^phase: +(Succeeded|Failed)'"
  t1=$(date +%s.%N)
  "$CP_CLI" status "$id" | grep -q "Succeeded" || { echo "$mode run failed"; cluster_logs; exit 1; }
  local shares
  shares=$(sed -n 's/.*rank \([0-9]*\) takes \([0-9]*\) of every.*/rank \1: \2/p' \
    "$top/$mode"/*/jobs/"$id"/gen-0/rank-*.log | tr '\n' ' ')
  awk -v m="$mode" -v a="$t0" -v b="$t1" -v n="$steps" -v s="${shares:-equal, 32 + 32}" \
    'BEGIN { printf "%-9s %6.1f s for %d steps, %.3f s/step (incl. start-up); shares: %s\n", m, b - a, n, (b - a) / n, s }'
  echo "$mode $t0 $t1" >>"$top/times"
  cluster_stop
  AGENT_PID=()
  COORD_PID=
}
run equal
run weighted
awk '{ t[$1] = $3 - $2 } END { printf "weighted shares: %.2fx faster than equal shares\n", t["equal"] / t["weighted"] }' "$top/times"
