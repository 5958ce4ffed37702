#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 2: a job author cannot make the trainer write outside the agent's
# --allowed-root. One agent confined to $work/root; $work/outside must stay untouched.
#   (a) output.dir "<outside>/a/b\0/../../../../<root>/out": a NUL byte made the path check see
#       a path inside the root while the trainer's C calls created <outside>/a/b. Sent by a
#       client that skips the CLI's own checks (rogue_agent submit); it must be refused
#       (INVALID_ARGUMENT naming output.dir and the control character), or fail on the node.
#   (b) links planted inside an allowed output.dir (metrics.jsonl to a file outside,
#       checkpoints/ and ranks/ to directories outside) were followed: the job wrote its
#       checkpoints and metrics outside the root. The job must fail at start-up as the job's
#       fault (no restart spent), naming a symbolic link, and write nothing outside.
# A job with a plain output.dir below the root still succeeds, with its checkpoints there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
root=$work/root outside=$work/outside
mkdir -p "$root" "$outside"

start_coordinator
start_agent confined --allowed-root "$root" --throughput off
wait_until 30 "agent confined Ready" ready_nodes 1 || fail "the agent did not register"
tiny_job "$root"
sed -i 's/checkpoint_every_steps: 0/checkpoint_every_steps: 2/' "$root/job.yaml"
# job_with DIR: the tiny job with output.dir set to DIR (YAML double-quoted: \0 is a NUL).
job_with() {
  local y
  y=$(<"$root/job.yaml")
  printf '%s\n' "${y/dir: out,/dir: \"$1\",}"
}
nothing_outside() {
  local found
  found=$(find "$outside" -mindepth 1 ! -name victim ! -type d -print)
  [[ -z $found ]] || fail "written outside the root: $found"
  [[ $(cat "$outside/victim" 2>/dev/null) == keep ]] || fail "the file outside was changed"
}

# ---- (a) a NUL byte in output.dir
echo keep >"$outside/victim"
job_with "$outside/a/b\\0/../../../../../../../../../..$root/out" >"$root/nul.yaml"
rc=0
"$ROGUE" submit --job "$root/nul.yaml" --base-dir "$root" >"$work/rogue.out" 2>&1 || rc=$?
cat "$work/rogue.out"
if ((rc == 0)); then
  job=$(sed -n 's/^accepted: //p' "$work/rogue.out")
  wait_until 120 "job $job to end" job_ended "$job" || fail "the NUL job did not end"
  [[ $(job_field "$job" phase) == Failed ]] || { "$CP_CLI" status "$job"; fail "the NUL job ran"; }
else
  ((rc == 2)) || fail "the rogue client failed (exit $rc)"
  grep -q "^refused: 3: .*output.dir: holds a control character (byte 0x00" "$work/rogue.out" ||
    fail "not refused as INVALID_ARGUMENT naming output.dir and the NUL"
fi
[[ -e $outside/a ]] && fail "the trainer created $outside/a (the path cut at its NUL)"
nothing_outside
echo "(a) a NUL in output.dir: refused, nothing created outside the root"

# ---- (b) links planted inside an allowed output.dir
mkdir -p "$root/planted" "$outside/ckpt" "$outside/ranks"
ln -s "$outside/victim" "$root/planted/metrics.jsonl"
ln -s "$outside/ckpt" "$root/planted/checkpoints"
ln -s "$outside/ranks" "$root/planted/ranks"
job_with "$root/planted" >"$root/planted.yaml"
job=$("$CP_CLI" submit "$root/planted.yaml") || fail "submit failed"
wait_until 300 "job $job to end" job_ended "$job" || fail "the planted job did not end"
"$CP_CLI" status "$job" >"$work/status.out"
cat "$work/status.out"
nothing_outside
[[ $(job_field "$job" phase) == Failed ]] || fail "the job with planted links did not fail"
grep -q "symbolic link" "$work/status.out" || fail "the failure does not name the link"
grep -q "restart limit reached" "$work/status.out" &&
  fail "the failure spent every restart instead of failing at start-up"
echo "(b) links planted as metrics.jsonl, checkpoints/, ranks/: job failed, nothing written outside"

# ---- a plain output.dir below the root still works
job_with "$root/good" >"$root/good.yaml"
job=$("$CP_CLI" submit "$root/good.yaml") || fail "submit failed"
wait_until 300 "job $job to end" job_ended "$job" || fail "the plain job did not end"
[[ $(job_field "$job" phase) == Succeeded ]] || { "$CP_CLI" status "$job"; fail "the plain job failed"; }
(($(committed_step "$root/good") == 4)) || fail "no checkpoint of step 4 in $root/good"
[[ -s $root/good/metrics.jsonl && -f $root/good/ranks/rank-0.json ]] || fail "outputs missing"
nothing_outside
echo "a plain output.dir below the root: Succeeded, checkpoints and metrics inside"
echo "allowed_root_escape: 1 passed, 0 failed"
