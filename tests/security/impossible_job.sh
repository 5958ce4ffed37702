#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 10 (rendezvous): a job that needs more nodes than the cluster has
# (`nodes: 50` on one node) does not hold the node it can get: nodes are bound to a job only
# once its minimum can start. A second job (nodes: 1) submitted after it runs on the node and
# succeeds, and the first fails at its join timeout (--join-timeout 20s here) naming the
# shortfall. Before: the node joined the first job and sat there for its whole join timeout
# (300 s by default), and the second job, waiting meanwhile, timed out too ("0 of 1..1 nodes
# joined") without ever running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
start_coordinator --join-timeout 20s
start_agent a
wait_until 30 "agent a to be Ready" ready_nodes 1 || fail "agent a did not register"
tiny_job "$work"
cd "$work"
sed 's/nodes: 1,/nodes: 50,/' job.yaml >fifty.yaml
cmp -s job.yaml fifty.yaml && fail "fifty.yaml: the rewrite changed nothing"
big=$("$CP_CLI" submit fifty.yaml) || fail "submit of nodes: 50 failed"
small=$("$CP_CLI" submit job.yaml) || fail "submit of nodes: 1 failed"
wait_until 60 "job $small to end" job_ended "$small" || fail "job $small did not end"
[[ $(job_field "$small" phase) == Succeeded ]] || { "$CP_CLI" status "$small"; fail "job $small did not succeed"; }
grep -q "job $big: node .* joined" "$CP_WORK/coordinator.log" &&
  fail "the node joined job $big, which could not start"
wait_until 60 "job $big to end" job_ended "$big" || fail "job $big did not end"
"$CP_CLI" status "$big" >big.txt
[[ $(job_field "$big" phase) == Failed ]] || { cat big.txt; fail "job $big is not Failed"; }
grep -q "rendezvous timed out after 20s: 0 of 50..50 nodes joined (.*); 50 more needed" big.txt ||
  { cat big.txt; fail "job $big's error does not name the shortfall"; }
echo "nodes: 50 on one node: job $small ran meanwhile; job $big failed: $(grep -o 'rendezvous timed out[^;]*; [0-9]* more needed' big.txt)"
echo "impossible_job: 1 passed, 0 failed"
