#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 4: a job author cannot make the control plane or the trainer allocate without
# bound. Through the real binaries:
#   - hidden_size: 1048576 is refused at submission, naming the key and its limit (before: it
#     was accepted and every rank died of std::bad_alloc, spending every restart);
#   - a model whose every dimension is within its limit but whose fp32 training state (16 bytes
#     per parameter) exceeds 256 GiB per rank is refused at submission with the estimate;
#   - procs_per_node: 100000 on a CPU node fails the job at planning, naming the node's core
#     count, with no restart spent (before: 100000 ranks were planned into a 17 MB StartRanks that
#     the agent could not receive, and the job ended node_lost after its reconnects);
#   - a model that passes the limits but not the node's memory (here an address-space limit,
#     `ulimit -v`) makes the trainer exit 3 with "out of memory while allocating the model"
#     instead of dying of an uncaught std::bad_alloc (SIGABRT, exit 134).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
start_coordinator
start_agent a
wait_until 30 "agent a to be Ready" ready_nodes 1 || fail "agent a did not register"
tiny_job "$work"
cd "$work" || exit 1

# variant NAME SED...: job.yaml rewritten by the sed expressions, as NAME.yaml
variant() {
  local name=$1
  shift
  sed "$@" job.yaml >"$name.yaml"
  cmp -s job.yaml "$name.yaml" && fail "$name.yaml: the rewrite changed nothing"
}
# refused NAME PATTERN: submitting NAME.yaml fails saying PATTERN, and nothing is stored
refused() {
  if "$CP_CLI" submit "$1.yaml" >"$1.out" 2>"$1.err"; then
    fail "$1: the job was accepted ($(cat "$1.out"))"
  fi
  grep -q -- "$2" "$1.err" || fail "$1: the refusal does not say '$2': $(cat "$1.err")"
  echo "refused $1: $(head -c 400 "$1.err")"
}
variant huge_hidden -e 's/hidden_size: 32/hidden_size: 1048576/'
refused huge_hidden "hidden_size 1048576 is over the limit of 16384"
variant huge_model -e 's/hidden_size: 32/hidden_size: 16384/' -e 's/num_hidden_layers: 1/num_hidden_layers: 256/' \
  -e 's/intermediate_size: 64/intermediate_size: 65536/' -e 's/num_attention_heads: 2/num_attention_heads: 128/'
refused huge_model "GiB per rank with distributed.sharding full_shard at 1 rank(s), over the limit of 256 GiB per rank"
[[ -z $("$CP_CLI" list | tail -n +2) ]] || fail "a refused job was stored: $("$CP_CLI" list)"

variant many_procs -e 's/procs_per_node: 1/procs_per_node: 100000/' -e '$a restart: {max_restarts: 3}'
id=$("$CP_CLI" submit many_procs.yaml) || fail "submit of procs_per_node 100000 failed"
wait_until 60 "job $id to end" job_ended "$id" || fail "job $id did not end"
"$CP_CLI" status "$id" >status.txt
[[ $(job_field "$id" phase) == Failed ]] || { cat status.txt; fail "job $id is not Failed"; }
[[ $(job_field "$id" restarts) == 0/3 ]] || { cat status.txt; fail "restarts were spent: $(job_field "$id" restarts)"; }
grep -q "planning: plan: procs_per_node 100000 but CPU node node-[0-9]* has [0-9]* core(s)" status.txt ||
  { cat status.txt; fail "the job's error does not name the node's core count"; }
echo "procs_per_node 100000: job $id failed at planning, 0 of 3 restarts used"

# Within the limits (1.6e9 parameters) but over the memory this process may map (3 GB).
variant big_model -e 's/hidden_size: 32/hidden_size: 4096/' -e 's/num_hidden_layers: 1/num_hidden_layers: 8/' \
  -e 's/intermediate_size: 64/intermediate_size: 16384/' -e 's/num_attention_heads: 2/num_attention_heads: 16/'
rc=0
(ulimit -v 3000000 && OMP_NUM_THREADS=1 exec timeout 120 "$TRAINER" train --config big_model.yaml) \
  >oom.out 2>&1 || rc=$?
((rc == 3)) || { tail -5 oom.out; fail "the trainer out of memory exited $rc, expected 3"; }
grep -q "error: .*big_model.yaml: out of memory while allocating the model" oom.out ||
  { tail -5 oom.out; fail "no clear out-of-memory error"; }
echo "out of memory at start-up: exit 3, $(grep -o 'out of memory while [a-z ]*' oom.out)"
echo "job_size_limits: 1 passed, 0 failed"
