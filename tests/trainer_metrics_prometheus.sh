#!/usr/bin/env bash
# ctest-labels: integration;serial
# A standalone trainer serves /metrics (prometheus-cpp): the page passes `promtool check
# metrics`, and a real Prometheus server (Debian's) scraping it every second sees, through its
# HTTP API, samples/s > 0 and the training loss falling. Skips (77) in a build without
# prometheus-cpp.
set -euo pipefail
T=${TRAINER:?}
command -v prometheus >/dev/null && command -v promtool >/dev/null || { echo "no prometheus"; exit 77; }
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
# Static TLS. glibc carves every module's static TLS out of each thread's stack, and Debian's
# civetweb (under prometheus-cpp) asks for 100 KiB stacks: OpenBLAS alone takes 60 KiB, a CUDA
# build's cuBLASLt 94 KB more (172 KB in all), which crashed or refused every /metrics worker. The
# trainer therefore defines pthread_attr_setstacksize itself (common/thread_stacks.h), adding the
# TLS to what a library asks for; thread_stacks_check tests the mechanism with 256 KiB of TLS.
tls=0
for f in "$T" $(ldd "$T" | awk '$3 ~ /^\// {print $3}'); do
  s=$(readelf -lW "$f" | awk '$1 == "TLS" {print $6}')
  [[ -n $s ]] && tls=$((tls + s))
done
echo "static TLS of the trainer and its libraries: $tls bytes"
nm -D --defined-only "$T" | grep -qw pthread_attr_setstacksize ||
  { echo "FAIL: the trainer does not export its pthread_attr_setstacksize (thread stacks would lose $tls bytes of TLS)"; exit 1; }

"$T" gen-data --out "$work/data" --train 2000 --dev 40 --seed 3 >/dev/null
cat >"$work/job.yaml" <<YAML
name: metrics-test
model:
  config: {hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, max_seq_len: 32}
train: {max_steps: 1000000, global_batch_size: 64, micro_batch_size: 64, lr: 3.0e-5,
        lr_schedule: constant, seed: 1}
output: {dir: out, checkpoint_every_steps: 0}
YAML
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
pport=$(free_port)

# A real Prometheus scrapes the trainer every second. It starts first, so that its first scrapes
# see the loss of the first steps. The job learns slowly on purpose (lr 3e-5, batch 64): its loss
# falls over the whole half minute the test watches, from about 0.5 (mean of the first five
# scrapes) to about 0.26 (the last five) at ~11k samples/s here, so step-to-step noise (±0.1) and
# a slower machine cannot hide the fall. With lr 2e-3 and batch 16 it reached a noisy plateau
# within a second and the means compared noise.
cat >"$work/prometheus.yml" <<YAML2
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: ringmaster-trainer
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YAML2
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do  # bounded wait until Prometheus serves its API
  curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null || { echo "FAIL: Prometheus never got ready"; tail -5 "$work/prometheus.log"; exit 1; }

OMP_NUM_THREADS=1 "$T" train --config "$work/job.yaml" --metrics-port "$port" >"$work/trainer.out" 2>"$work/trainer.log" &
pids+=($!)
served=""
for _ in $(seq 1 300); do  # bounded wait for the log line that names the port
  served=$(grep -o 'metrics on http://[^:]*:[0-9]*' "$work/trainer.log" | grep -o '[0-9]*$' || true)
  [[ -n $served ]] && break
  if grep -q "no prometheus-cpp" "$work/trainer.log"; then echo "built without prometheus-cpp"; exit 77; fi
  sleep 0.1
done
[[ $served == "$port" ]] || { echo "FAIL: trainer never served metrics on $port"; cat "$work/trainer.log"; exit 1; }

# The exposition format is valid (promtool exits non-zero on errors; lint warnings are shown).
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/metrics" >"$work/page.txt" && grep -q '^ringmaster_trainer_loss' "$work/page.txt" && break
  sleep 0.1
done
promtool check metrics <"$work/page.txt" || { echo "FAIL: promtool rejects /metrics"; exit 1; }
for name in ringmaster_trainer_samples_total ringmaster_trainer_tokens_total \
  ringmaster_trainer_step_seconds_bucket ringmaster_trainer_loss ringmaster_trainer_learning_rate \
  ringmaster_trainer_grad_norm ringmaster_trainer_last_step_timestamp_seconds \
  ringmaster_trainer_data_wait_seconds_total ringmaster_trainer_world_size; do
  grep -q "^$name{" "$work/page.txt" || { echo "FAIL: /metrics lacks $name"; exit 1; }
done
grep -q 'ringmaster_job="[^"]*",rank="0"' "$work/page.txt" || { echo "FAIL: no ringmaster_job/rank labels"; exit 1; }

query() {  # PromQL → first value, or empty
  curl -sf "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
# Wait (bounded) until Prometheus holds 24 scrapes of the loss, then compare the mean of the first
# five with the mean of the last five (per-step losses are noisy; means over seconds are not).
n=0
for _ in $(seq 1 600); do
  n=$(query 'count_over_time(ringmaster_trainer_loss[5m])')
  [[ -n $n ]] && ((${n%.*} >= 24)) && break
  sleep 0.1
done
((${n%.*} >= 24)) || { echo "FAIL: Prometheus holds only '${n}' scrapes"; tail -5 "$work/prometheus.log"; exit 1; }
rate=$(query 'rate(ringmaster_trainer_samples_total[5s])')
read -r first last < <(curl -sf "http://127.0.0.1:$pport/api/v1/query" \
  --data-urlencode 'query=ringmaster_trainer_loss[5m]' | python3 -c '
import json, sys
v = [float(x[1]) for x in json.load(sys.stdin)["data"]["result"][0]["values"]]
print(sum(v[:5]) / 5, sum(v[-5:]) / 5)
print("scraped losses:", " ".join("%.3f" % x for x in v), file=sys.stderr)')
echo "prometheus: samples/s $rate; loss, mean of the first 5 scrapes $first, of the last 5 $last"
awk -v r="${rate:-0}" 'BEGIN { exit !(r > 0) }' || { echo "FAIL: Prometheus saw no samples/s"; exit 1; }
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }' || { echo "FAIL: loss did not fall"; exit 1; }
