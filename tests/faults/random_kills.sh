#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# kill -9 at random points (docs/reliability.md, "Fault scenarios"). A job on a coordinator and
# two agents (one CPU rank each, nodes 2:2, full_shard, a checkpoint every 4 steps) takes
# RINGMASTER_FAULT_KILLS (default 4) SIGKILLs. Each lands a random 0-4 s after a generation's
# trainers have started (while they load, meet, step or write a checkpoint) and hits a random
# one of: a trainer of a random rank, a random agent (restarted at once, as systemd or a
# DaemonSet would), the coordinator (restarted on its database). The seed is printed; rerun one
# with RINGMASTER_FAULT_SEED=N (the kill points still depend on timing). Expected after every
# kill: a new generation running within 60 s that resumes from a checkpoint no older than the
# newest committed before the kill. At the end: the job succeeded, restarts used = trainer and
# agent kills, and its losses and final weights equal an uninterrupted single-process run (the
# tolerance of tests/control_plane_kill.sh).
set -euo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/cluster.sh
source "$here/lib/cluster.sh"
# shellcheck source=../lib/resume_job.sh
source "$here/lib/resume_job.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
seed=${RINGMASTER_FAULT_SEED:-$(($(date +%s%N) % 1000000))}
kills=${RINGMASTER_FAULT_KILLS:-4}
echo "seed $seed, $kills kills (rerun: RINGMASTER_FAULT_SEED=$seed)"
RANDOM=$seed
"$T" gen-data --out "$work/data" --train 400 --dev 40 --seed 5 >/dev/null
RJ_NAME=random-kills RJ_STEPS=64 RJ_SHARDING=full_shard RJ_NODES=2:2 RJ_RESTARTS=$((kills + 2))
resume_reference

export RINGMASTER_SLOWDOWN=40 RINGMASTER_COLLECTIVE_TIMEOUT_S=30 OMP_NUM_THREADS=1
coord_flags=(--lost-after 3s --last-call 1s)
start_coordinator "${coord_flags[@]}"
start_agent a0 --throughput off
start_agent a1 --throughput off
wait_until 30 "two ready agents" ready_nodes 2
id=$("$CP_CLI" submit "$(resume_job out)")
echo "job $id"
on_fail() { echo "FAIL: $*"; "$CP_CLI" status "${id:-}" || true; cluster_logs; exit 1; }
ended() { job_ended "$id"; }
trainers_of() { pgrep -f "ringmaster-trainer train --config $work/a.*/jobs/$id/gen-$1/" || true; }
# Generation $1 is running and both its trainers exist (or the job ended).
launched() { ended || [[ $(job_field "$id" phase) == Running && $(job_field "$id" generation) == "$1" && $(trainers_of "$1" | wc -l) -ge 2 ]]; }

gen=0 counted=0 done_kills=0
for ((i = 1; i <= kills; i++)); do
  wait_until 60 "generation $gen with its trainers" launched "$gen" || on_fail "generation $gen never ran"
  ended && break
  delay=$((RANDOM % 4000))
  sleep "$((delay / 1000)).$(printf '%03d' $((delay % 1000)))"  # the random kill point
  ended && break
  c=$(committed_step "$work/out")
  case $((RANDOM % 3)) in
    0)
      mapfile -t pids < <(trainers_of "$gen")
      ((${#pids[@]} > 0)) || { echo "kill $i: no trainer left of generation $gen"; continue; }
      victim=${pids[RANDOM % ${#pids[@]}]}
      what="trainer pid $victim"
      kill -KILL "$victim" 2>/dev/null || true
      counted=$((counted + 1))
      ;;
    1)
      a=a$((RANDOM % 2))
      what="agent $a"
      kill -KILL "${AGENT_PID[$a]}"
      start_agent "$a" --throughput off
      counted=$((counted + 1))
      ;;
    2)
      what="the coordinator"
      kill -KILL "$COORD_PID"
      start_coordinator "${coord_flags[@]}"
      ;;
  esac
  done_kills=$((done_kills + 1))
  echo "kill $i: $what, ${delay} ms into generation $gen (committed: step $c)"
  next() { ended || [[ $(job_field "$id" generation) -gt $gen && $(job_field "$id" phase) == Running ]]; }
  wait_until 60 "a generation after $gen" next || on_fail "no restart after kill $i"
  ended && break
  gen=$(job_field "$id" generation)
  # With nothing committed there is nothing to resume from. The check waits for the resume, so
  # the next kill cannot land before it.
  ((c == 0)) || check_resumed "$id" "$gen" "$c"
done

wait_until 300 "the job to end" ended || on_fail "the job did not end"
"$CP_CLI" status "$id"
[[ $(job_field "$id" phase) == Succeeded ]] || on_fail "job did not succeed"
echo "$done_kills kills landed before the job ended"
((done_kills >= 2)) || { echo "FAIL: only $done_kills kills landed: the job is too short for the test"; RJ_FAIL=1; }
restarts=$(job_field "$id" restarts)
[[ ${restarts%%/*} == "$counted" ]] ||
  { echo "FAIL: restarts $restarts, expected $counted (trainer and agent kills)"; RJ_FAIL=1; }
compare_with_reference
((RJ_FAIL == 0)) || cluster_logs
exit $RJ_FAIL
