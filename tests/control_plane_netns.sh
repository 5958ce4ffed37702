#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# Multi-node with real network namespaces: the coordinator and three agents each in a namespace
# of its own with its own address, linked through a bridge (itself in a namespace). The job asks
# for nodes 2:3. Mid-training, one agent's link is cut (its bridge port goes down): the
# coordinator loses its heartbeat, the job restarts on the two remaining nodes (still >= MIN),
# resumes from the newest committed checkpoint and completes; its losses and final weights
# equal an uninterrupted single-process run (dropout off, same global batch).
# Needs root and iproute2 (CI runs as root); skips otherwise.
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 for network namespaces"
  exit 77
fi
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
# shellcheck source=lib/resume_job.sh
source "$here/lib/resume_job.sh"
work=$(mktemp -d)
CP_WORK=$work
P=rmt$$  # namespace and link names: unique per run
NSS=("${P}br" "${P}c" "${P}a0" "${P}a1" "${P}a2")
teardown() {
  cluster_stop
  local ns p
  for ns in "${NSS[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap teardown EXIT

# ---- the network: 10.201.0.0/24, coordinator .1, agents .10, .11, .12
subnet=10.201.0
ip netns add "${P}br"
ip -n "${P}br" link set lo up
ip -n "${P}br" link add br0 type bridge
ip -n "${P}br" link set br0 up
attach() {  # $1 = namespace suffix, $2 = host number
  local ns=$P$1
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "${P}v$1" type veth peer name "${P}b$1"
  ip link set "${P}v$1" netns "$ns"
  ip link set "${P}b$1" netns "${P}br"
  ip -n "$ns" link set "${P}v$1" name eth0
  ip -n "$ns" addr add "$subnet.$2/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "${P}br" link set "${P}b$1" master br0
  ip -n "${P}br" link set "${P}b$1" up
}
attach c 1
attach a0 10
attach a1 11
attach a2 12
link_up() { [[ $(ip netns exec "$P$1" cat /sys/class/net/eth0/operstate) == up ]]; }
for n in c a0 a1 a2; do wait_until 10 "link of $n up" link_up "$n"; done

# Wrappers: each part of the control plane runs in its namespace (exec keeps the pid).
wrap() {  # $1 = file, $2 = namespace, $3 = binary
  printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$2" "$3" >"$1"
  chmod +x "$1"
}
cluster_init "$work"
CP_ADDR=$subnet.1
export RINGMASTER_COORDINATOR=$CP_ADDR:$CP_PORT
cluster_tls "$CP_ADDR"  # not loopback: mutual TLS and tokens, as in production
wrap "$work/cli" "${P}c" "$CP_CLI"
wrap "$work/coordinator" "${P}c" "$CP_COORD"
real_agent=$CP_AGENT
CP_CLI=$work/cli
CP_COORD=$work/coordinator

"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 21 >/dev/null
steps=48
RJ_NAME=netns-cut RJ_STEPS=$steps RJ_SHARDING=full_shard RJ_NODES=2:3 RJ_RESTARTS=3
RJ_SEED=17 RJ_BATCH=24 RJ_EPOCHS=2
resume_reference

export RINGMASTER_SLOWDOWN=20 RINGMASTER_COLLECTIVE_TIMEOUT_S=15 OMP_NUM_THREADS=1
start_coordinator --lost-after 3s --last-call 2s
for i in 0 1 2; do
  wrap "$work/agent$i" "${P}a$i" "$real_agent"
  CP_AGENT=$work/agent$i
  start_agent "a$i" --address "$subnet.$((10 + i))" --throughput off
done
wait_until 30 "three ready agents" ready_nodes 3
"$CP_CLI" nodes
id=$("$CP_CLI" submit "$(resume_job out)")
on_fail() { echo "FAIL: $*"; cluster_logs; exit 1; }
committed() { committed_step "$work/out"; }
running_with() {  # generation >= $1 running with $2 ranks
  local st
  st=$("$CP_CLI" status "$id")
  [[ $(sed -n 's/^phase: *//p' <<<"$st") == Running &&
    $(sed -n 's/^generation: *//p' <<<"$st") -ge $1 &&
    $(sed -n 's/^world: *\([0-9]*\) rank.*/\1/p' <<<"$st") == "$2" ]]
}
wait_until 60 "generation 0 running on 3 nodes" running_with 0 3 || on_fail "did not start on 3 nodes"
wait_until 120 "a checkpoint at step 8" committed_at_least "$work/out" 8 || on_fail "no progress"
c=$(committed)
ip -n "${P}br" link set "${P}ba2" down  # a2's cable is pulled
echo "cut a2's link (committed: step $c)"
t_cut=$SECONDS
wait_until 120 "a generation on the 2 remaining nodes" running_with 1 2 ||
  on_fail "no restart on the remaining nodes"
echo "restarted on 2 nodes $((SECONDS - t_cut)) s after the cut"
gen=$(job_field "$id" generation)
check_resumed "$id" "$gen" "$c" 90
wait_until 300 "the job to end" job_ended "$id" ||
  on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
if "$CP_CLI" nodes | grep '^a2 ' | grep -q Lost; then
  echo "ok   a2 is Lost"
else
  echo "FAIL a2 is not shown Lost"; "$CP_CLI" nodes; RJ_FAIL=1
fi
compare_with_reference
((RJ_FAIL == 0)) || cluster_logs
exit $RJ_FAIL
