#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 8: /metrics is plaintext and unauthenticated, so a metrics address beyond
# loopback needs an explicit opt-in. The coordinator and the agent refuse
# `--metrics-listen 0.0.0.0:PORT` at start (exit 2, naming the address and the flag that allows
# it) unless --metrics-insecure-public is given; the trainer serves --metrics-port on 127.0.0.1
# and refuses a non-loopback RINGMASTER_METRICS_HOST (exit 3) unless
# RINGMASTER_METRICS_INSECURE_PUBLIC=1. Loopback addresses need no flag. Before the fix the
# coordinator and agent served 0.0.0.0 silently and the trainer bound 0.0.0.0 by default.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
guard="not a loopback address, and /metrics is served in plaintext without authentication"

# coord OUT FLAGS...: the coordinator for at most 3 s; its exit status (124: it kept running).
coord() {
  local out=$1
  shift
  timeout 3 "$CP_COORD" --listen "127.0.0.1:$CP_PORT" --db "$work/coord.db" --insecure-loopback \
    "$@" >"$out" 2>&1
}
rc=0
coord "$work/c1.out" --metrics-listen 0.0.0.0:0 || rc=$?
((rc == 2)) || { cat "$work/c1.out"; fail "coordinator with --metrics-listen 0.0.0.0:0: exit $rc, expected 2"; }
grep -q -- "--metrics-listen 0.0.0.0:0: $guard.*--metrics-insecure-public" "$work/c1.out" ||
  fail "the coordinator's refusal does not explain itself: $(cat "$work/c1.out")"
rc=0
coord "$work/c2.out" --metrics-listen 0.0.0.0:0 --metrics-insecure-public || rc=$?
((rc == 124)) || { cat "$work/c2.out"; fail "coordinator with --metrics-insecure-public did not run (exit $rc)"; }
grep -q "metrics on http://0.0.0.0:" "$work/c2.out" || fail "no public /metrics with the opt-in: $(cat "$work/c2.out")"
rc=0
coord "$work/c3.out" --metrics-listen 127.0.0.1:0 || rc=$?
((rc == 124)) || { cat "$work/c3.out"; fail "coordinator with a loopback metrics address did not run (exit $rc)"; }
echo "coordinator: 0.0.0.0 refused, allowed with --metrics-insecure-public, loopback needs no flag"

# The agent checks its flags before it contacts the (absent) coordinator.
rc=0
timeout 10 "$CP_AGENT" --coordinator "127.0.0.1:$CP_PORT" --trainer "${TRAINER:?}" --work-dir "$work/a" \
  --insecure-loopback --metrics-listen=0.0.0.0:0 >"$work/a.out" 2>&1 || rc=$?
((rc != 0 && rc != 124)) || { cat "$work/a.out"; fail "agent with --metrics-listen=0.0.0.0:0: exit $rc"; }
grep -q -- "--metrics-listen 0.0.0.0:0: $guard.*--metrics-insecure-public" "$work/a.out" ||
  fail "the agent's refusal does not explain itself: $(cat "$work/a.out")"
start_coordinator
start_agent a --metrics-listen=0.0.0.0:0 --metrics-insecure-public
wait_until 30 "the agent with --metrics-insecure-public to be Ready" ready_nodes 1 ||
  fail "the agent with --metrics-insecure-public did not join: $(tail -3 "$work/a.log")"
grep -q "metrics on http://0.0.0.0:" "$work/a.log" || fail "no public agent /metrics with the opt-in"
echo "agent: 0.0.0.0 refused, allowed with --metrics-insecure-public"

# The trainer: loopback by default, a public host only with the opt-in.
cd "$work" || exit 1
tiny_job "$work"
rc=0
RINGMASTER_METRICS_HOST=0.0.0.0 OMP_NUM_THREADS=1 timeout 120 "$TRAINER" train --config job.yaml \
  --metrics-port 0 >"$work/t1.out" 2>&1 || rc=$?
((rc == 3)) || { cat "$work/t1.out"; fail "trainer with RINGMASTER_METRICS_HOST=0.0.0.0: exit $rc, expected 3"; }
grep -q "RINGMASTER_METRICS_HOST=0.0.0.0: $guard.*RINGMASTER_METRICS_INSECURE_PUBLIC=1" "$work/t1.out" ||
  fail "the trainer's refusal does not explain itself: $(cat "$work/t1.out")"
OMP_NUM_THREADS=1 timeout 120 "$TRAINER" train --config job.yaml --metrics-port 0 --overwrite \
  >"$work/t2.out" 2>&1 || { cat "$work/t2.out"; fail "the trainer with --metrics-port 0 failed"; }
grep -q "metrics on http://127.0.0.1:" "$work/t2.out" ||
  fail "the trainer's /metrics is not on loopback by default: $(grep 'metrics on' "$work/t2.out")"
RINGMASTER_METRICS_HOST=0.0.0.0 RINGMASTER_METRICS_INSECURE_PUBLIC=1 OMP_NUM_THREADS=1 timeout 120 \
  "$TRAINER" train --config job.yaml --metrics-port 0 --overwrite >"$work/t3.out" 2>&1 ||
  { cat "$work/t3.out"; fail "the trainer with the opt-in failed"; }
grep -q "metrics on http://0.0.0.0:" "$work/t3.out" || fail "no public trainer /metrics with the opt-in"
echo "trainer: loopback by default, RINGMASTER_METRICS_HOST=0.0.0.0 refused without the opt-in"
echo "metrics_public_guard: 1 passed, 0 failed"
