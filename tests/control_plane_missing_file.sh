#!/usr/bin/env bash
# ctest-labels: integration;serial
# A job whose config names a missing file fails once, naming the file, without spending
# restarts: the trainer exits 3 (the job itself is wrong) and the coordinator fails the job at
# once instead of looping through restart.max_restarts.
set -euo pipefail
T=${TRAINER:?}
B=${RINGMASTER_BINARY_DIR:?}
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$T" gen-data --out "$work/data" --train 50 --dev 10 --seed 3 >/dev/null
cat >"$work/job.yaml" <<YAML
name: missing-file
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/no-such-file.tsv, max_seq_len: 32}
train: {max_steps: 5, global_batch_size: 8, micro_batch_size: 4}
output: {dir: out}
restart: {max_restarts: 3}
YAML
rc=0
"$CLI" local "$work/job.yaml" --nodes 2 --procs-per-node 1 --trainer "$T" >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out" "$work/err"
# ringmaster local keeps its logs when a job fails; this failure is the expected one.
kept=$(grep -o 'logs kept in [^ ]*' "$work/err" | awk '{print $4}' || true)
[[ -n $kept && -d $kept ]] && rm -rf "$kept"
[[ $rc -ne 0 ]] || { echo "FAIL: ringmaster local exited 0 for a job with a missing file"; exit 1; }
grep -q "Failed.*no-such-file.tsv" "$work/out" || { echo "FAIL: the final status does not name the missing file"; exit 1; }
grep -q "Failed.*restarts 0/3" "$work/out" || { echo "FAIL: restarts were spent on a deterministic failure"; exit 1; }
if grep -q "Restarting" "$work/out"; then echo "FAIL: the job went through Restarting"; exit 1; fi
