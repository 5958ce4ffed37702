#!/usr/bin/env bash
# ctest-labels: integration;serial
# `ringmaster local` says how to reach its cluster: the `status` and `logs` command lines it prints
# (and keeps in its directory's README) work from another terminal while the job runs, with no
# flag to guess. The job is then stopped with Ctrl-C (SIGINT), which cancels it.
set -euo pipefail
T=${TRAINER:?}
B=${RINGMASTER_BINARY_DIR:?}
CLI=$B/cli/ringmaster
for bin in "$CLI" "$B/agent/ringmaster-agent" "$B/coordinator/ringmaster-coordinator"; do
  [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
done
work=$(mktemp -d)
local_pid=
cleanup() {
  [[ -n $local_pid ]] && kill -INT "$local_pid" 2>/dev/null && wait "$local_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$T" gen-data --out "$work/data" --train 200 --dev 40 --seed 3 >/dev/null
cat >"$work/job.yaml" <<YAML
name: local-reach
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {epochs: 100000, global_batch_size: 8, micro_batch_size: 8, lr: 1.0e-3, seed: 1}
output: {dir: out, checkpoint_every_steps: 0}
YAML
cd "$work"
"$CLI" local job.yaml --nodes 1 --procs-per-node 1 --trainer "$T" --keep \
  >"$work/local.out" 2>"$work/local.err" &
local_pid=$!
# The command lines appear once the job is submitted (bounded: 60 s of 0.2 s polls, or the end
# of `ringmaster local`).
for _ in $(seq 300); do
  grep -q " logs .* --rank 0 " "$work/local.err" && break
  kill -0 "$local_pid" 2>/dev/null || break
  sleep 0.2
done
status_cmd=$(sed -n 's/^ringmaster local:   \(.* status .*\)$/\1/p' "$work/local.err")
logs_cmd=$(sed -n 's/^ringmaster local:   \(.* logs .*\)$/\1/p' "$work/local.err")
fail=0
if [[ -z $status_cmd || -z $logs_cmd ]]; then
  echo "FAIL: no status/logs command line printed"; cat "$work/local.err"; exit 1
fi
echo "printed: $status_cmd"
echo "printed: $logs_cmd"
job=$(sed -n 's/^ringmaster local: job \([^ ]*\) on .*/\1/p' "$work/local.err")
# The job reaches Running with a step; `status` (as printed) shows it.
ok=0
for _ in $(seq 300); do
  if out=$($status_cmd 2>&1) && grep -q "Running" <<<"$out" && grep -q "step [1-9]" <<<"$out"; then
    ok=1; break
  fi
  sleep 0.2
done
if ((ok)); then echo "ok   the printed status command shows job $job running"
else echo "FAIL: the printed status command did not show the job running: $out"; fail=1; fi
if out=$($logs_cmd 2>&1) && [[ -n $out ]]; then
  echo "ok   the printed logs command returns rank 0's log ($(wc -l <<<"$out") lines)"
else
  echo "FAIL: the printed logs command failed: $out"; fail=1
fi
cluster_dir=$(sed -n 's/.*logs and work dirs in \(.*\))$/\1/p' "$work/local.err")
if grep -qF -- "$status_cmd" "$cluster_dir/README" && grep -qF -- "$logs_cmd" "$cluster_dir/README"; then
  echo "ok   both lines kept in $cluster_dir/README"
else
  echo "FAIL: $cluster_dir/README lacks the command lines"; fail=1
fi
kill -INT "$local_pid"
rc=0; wait "$local_pid" || rc=$?
local_pid=
[[ $rc -ne 0 ]] || { echo "FAIL: an interrupted local run exited 0"; fail=1; }
rm -rf "$cluster_dir"
exit $fail
