#!/usr/bin/env bash
# ctest-labels: integration;serial
# A real Prometheus (Debian's) scrapes a `ringmaster local` job (2 nodes x 1 rank, started with
# --metrics-port): the coordinator and both agents. Through Prometheus' HTTP API it must see the
# job Running, samples/s > 0, rank 0's loss falling, and — after a trainer is killed with
# SIGKILL — the restart counter and the generation move and the job run again. Every endpoint's
# page passes `promtool check metrics`, and every metric the Grafana dashboard and the alert
# rules name is on those pages (tools/check-promql-names.py). The job is long; the test cancels
# it at the end and `ringmaster local` must report it Cancelled and exit.
set -euo pipefail
T=${TRAINER:?}
B=${RINGMASTER_BINARY_DIR:?}
S=${RINGMASTER_SOURCE_DIR:?}
CLI=$B/cli/ringmaster
[[ -x $CLI ]] || { echo "SKIP: no control plane built"; exit 77; }
command -v prometheus >/dev/null && command -v promtool >/dev/null || { echo "no prometheus"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work" "${dir:-/nonexistent}"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$work/local.log" >&2 || true; exit 1; }

"$T" gen-data --out "$work/data" --train 2000 --dev 40 --seed 3 >/dev/null
cat >"$work/job.yaml" <<YAML
name: prom-cluster
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32}
train: {max_steps: 1000000, global_batch_size: 16, micro_batch_size: 8, lr: 2.0e-3,
        lr_schedule: constant, seed: 1}
output: {dir: out, checkpoint_every_steps: 10}
restart: {max_restarts: 3}
YAML

# Three consecutive free ports: the coordinator, agent 0, agent 1.
base=$(python3 - <<'PY'
import random, socket
for _ in range(200):
    b = random.randint(20000, 60000)
    try:
        socks = []
        for p in range(b, b + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(b); break
    except OSError:
        pass
PY
)
export OMP_NUM_THREADS=1
"$CLI" local "$work/job.yaml" --nodes 2 --procs-per-node 1 --trainer "$T" --metrics-port "$base" \
  --keep >"$work/local.log" 2>&1 &
local_pid=$!
pids+=($local_pid)

# The coordinator's address and the local cluster's directory, from `ringmaster local`'s output.
coord="" dir=""
for _ in $(seq 1 300); do
  read -r coord dir < <(sed -n 's/.*coordinator on \([^ ]*\) (logs and work dirs in \([^)]*\)).*/\1 \2/p' \
    "$work/local.log" | head -1) || true
  [[ -n $coord ]] && break
  sleep 0.1
done
[[ -n $coord ]] || fail "ringmaster local never said where its coordinator is"

pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: ringmaster-coordinator
    static_configs: [{targets: ["127.0.0.1:$base"]}]
  - job_name: ringmaster-agent
    static_configs: [{targets: ["127.0.0.1:$((base + 1))", "127.0.0.1:$((base + 2))"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
pids+=($!)
query() {  # PromQL -> first value, or empty
  curl -sf "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
wait_query() {  # SECONDS PROMQL DESCRIPTION: until PROMQL returns a non-empty result
  local deadline=$((SECONDS + $1)) v
  while ((SECONDS < deadline)); do
    v=$(query "$2")
    [[ -n $v ]] && { echo "$v"; return 0; }
    sleep 0.2
  done
  fail "Prometheus never saw $3 ($2)"
}

wait_query 120 'ringmaster_job_phase{phase="running"} == 1' "the job Running" >/dev/null
rate=$(wait_query 60 'sum(rate(ringmaster_trainer_samples_total[5s])) > 0' "samples/s > 0")
echo "prometheus: job Running, $rate samples/s"
wait_query 120 'count_over_time(ringmaster_trainer_loss{rank="0"}[5m]) >= 30' "30 scrapes of the loss" >/dev/null
read -r first last < <(curl -sf "http://127.0.0.1:$pport/api/v1/query" \
  --data-urlencode 'query=ringmaster_trainer_loss{rank="0"}[5m]' | python3 -c '
import json, sys
v = [float(x[1]) for x in json.load(sys.stdin)["data"]["result"][0]["values"]]
print(sum(v[:5]) / 5, sum(v[-5:]) / 5)')
echo "prometheus: rank 0 loss, mean of the first 5 scrapes $first, of the last 5 $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }' || fail "loss did not fall"

# Every endpoint's page is valid, and the dashboard and rules name only metrics found there.
pages=()
for p in "$base" $((base + 1)) $((base + 2)); do
  curl -sf "http://127.0.0.1:$p/metrics" >"$work/page-$p.txt" || fail "no /metrics on port $p"
  promtool check metrics <"$work/page-$p.txt" || fail "promtool rejects /metrics on port $p"
  pages+=("$work/page-$p.txt")
done
python3 "$S/tools/check-promql-names.py" --dashboard "$S/docs/grafana/ringmaster.json" \
  --rules "$S/docs/prometheus/alerts.yml" --exported "${pages[@]}" ||
  fail "the dashboard or the alert rules name metrics no endpoint exports"

# kill -9 rank 1's trainer: the restart counter and the generation move, and the job runs again.
[[ $(query 'max(ringmaster_job_restarts_total)') == 0 ]] || fail "restarts before the kill"
victim=""
for p in $(pgrep -f "ringmaster-trainer train --config $dir/" || true); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'RANK=1'; then victim=$p; fi
done
[[ -n $victim ]] || fail "no trainer process of rank 1 under $dir"
kill -KILL "$victim"
restarts=$(wait_query 60 'max(ringmaster_job_restarts_total) >= 1' "the restart counter move")
gen=$(wait_query 60 'max(ringmaster_job_generation) >= 1' "the generation move")
wait_query 120 'max(ringmaster_job_phase{phase="running"}) == 1 and max(ringmaster_job_generation) >= 1' \
  "the job Running again" >/dev/null
echo "prometheus: after kill -9 of rank 1: restarts $restarts, generation $gen, Running again"

"$CLI" --coordinator "$coord" --insecure-loopback cancel "$(sed -n 's/.*job \(job-[0-9]*\) on .*/\1/p' "$work/local.log" | head -1)" \
  >/dev/null || fail "cancel failed"
status=0
wait "$local_pid" || status=$?
grep -q "Cancelled" "$work/local.log" || fail "ringmaster local did not report the job Cancelled"
((status != 0)) || fail "ringmaster local exited 0 for a cancelled job"
echo PASS
