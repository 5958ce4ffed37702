#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 6: an error that no restart can fix must not spend the restart budget. The
# agent runs with --allowed-root and the job's output.dir lies outside it: the agent refuses to
# start the ranks, marked as a deterministic start-up error, and the job fails at once, at
# generation 0 with 0 of its 3 restarts used, saying why and that it was not restarted.
# Before the fix the coordinator treated the refusal as a rank that failed to start, restarted
# three times into the same refusal and ended with "restart limit reached (... 3 used)".
# The same for output.tensorboard_dir outside the root with output.dir inside it: refused at
# start (naming the key), not left to the trainer, which warned, wrote no events and succeeded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
mkdir -p "$work/root" "$work/outside"
start_coordinator
start_agent a --allowed-root "$work/root"
wait_until 30 "agent a to be Ready" ready_nodes 1 || fail "agent a did not register"

tiny_job "$work/root"
echo "restart: {max_restarts: 3}" >>"$work/root/job.yaml"
# refused_at_start NAME KEYS FIELD: the tiny job with its `dir: out,` replaced by KEYS must fail
# at once, its error naming FIELD as outside the allowed roots, a deterministic start-up error,
# 0 of its 3 restarts spent, nothing created outside the root nor its output.dir.
refused_at_start() {
  local id
  sed "s|dir: out,|$2|" "$work/root/job.yaml" >"$work/root/$1.yaml"
  grep -qF "$2" "$work/root/$1.yaml" || fail "$1: the job file was not rewritten"
  id=$(cd "$work/root" && "$CP_CLI" submit "$1.yaml") || fail "$1: submit failed"
  wait_until 120 "job $id to end" job_ended "$id" || fail "job $id did not end"
  "$CP_CLI" status "$id" >"$work/status.txt"
  cat "$work/status.txt"
  [[ $(job_field "$id" phase) == Failed ]] || fail "job $id ($1) is not Failed"
  [[ $(job_field "$id" restarts) == 0/3 ]] || fail "restarts were spent: $(job_field "$id" restarts)"
  grep -q "deterministic_startup: .*$3 '[^']*' resolves to '[^']*', outside the allowed roots.*not restarted" \
    "$work/status.txt" || fail "the error does not say it is a deterministic start-up error about $3"
  [[ -z $(ls -A "$work/outside") && ! -e $work/root/out ]] || fail "the refused job ($1) created directories"
  echo "job $id: $3 outside the root: Failed at once (deterministic start-up error), 0 of 3 restarts used"
}

refused_at_start output_dir "dir: $work/outside/out," output.dir
# output.dir inside the root, output.tensorboard_dir outside it.
refused_at_start tensorboard_dir "dir: out, tensorboard_dir: $work/outside/tb," output.tensorboard_dir
echo "path_refusal_no_restart: 2 passed, 0 failed"
