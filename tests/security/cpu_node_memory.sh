#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 4 (host memory): a CPU node's memory is checked at planning. The agent reports
# its node's memory when it registers (MemTotal, or its cgroup limit when lower); a job whose
# fp32 model state (16 bytes per parameter) is within the 256 GiB per-rank limit but more than
# this machine's memory fails at planning, naming the node, what its ranks need and what it has,
# without launching a rank or spending a restart. Before, nothing was checked: the ranks started
# and died allocating the model (exit 3 at best, the OOM killer at worst). The model: hidden
# 16384, intermediate 65536, ~3.2e9 parameters (48 GiB of state) per layer, as many layers as
# exceed this machine's memory; skipped on a machine with more than 200 GiB.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
mem_kib=$(awk '$1 == "MemTotal:" {print $2}' /proc/meminfo)
[[ -n $mem_kib ]] || { echo "SKIP: no MemTotal in /proc/meminfo"; exit 77; }
layers=$((mem_kib / (48 * 1024 * 1024) + 1))
((layers <= 4)) || { echo "SKIP: $((mem_kib >> 20)) GiB of memory: no model within the limits exceeds it"; exit 77; }

start_coordinator
start_agent a --throughput off
wait_until 30 "agent a to be Ready" ready_nodes 1 || fail "agent a did not register"
tiny_job "$work"
cd "$work" || exit 1
sed -e 's/hidden_size: 32/hidden_size: 16384/' -e "s/num_hidden_layers: 1/num_hidden_layers: $layers/" \
  -e 's/intermediate_size: 64/intermediate_size: 65536/' -e 's/num_attention_heads: 2/num_attention_heads: 128/' \
  -e '$a restart: {max_restarts: 3}' job.yaml >big.yaml
id=$("$CP_CLI" submit big.yaml) || fail "submit of the $layers-layer model failed"
wait_until 60 "job $id to end" job_ended "$id" || fail "job $id did not end"
"$CP_CLI" status "$id" >status.txt
[[ $(job_field "$id" phase) == Failed ]] || { cat status.txt; fail "job $id is not Failed"; }
[[ $(job_field "$id" restarts) == 0/3 ]] || { cat status.txt; fail "restarts were spent: $(job_field "$id" restarts)"; }
grep -q "planning: plan: the model's fp32 training state (.* parameters x 16 bytes, sharding full_shard over 1 rank(s)) needs [0-9.]* GiB per rank, [0-9.]* GiB for the 1 rank(s) on CPU node node-[0-9]* ($(hostname)), but it has [0-9.]* GiB of memory" status.txt ||
  { cat status.txt; fail "the job's error does not name the node, the need and the memory"; }
grep -q "job $id generation 0: started" "$work/a.log" && fail "a rank of job $id was started"
echo "$layers-layer model on a $((mem_kib >> 20)) GiB node: $(grep -o 'needs .* of memory' status.txt)"
echo "cpu_node_memory: 1 passed, 0 failed"
