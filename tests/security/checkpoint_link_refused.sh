#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 6 (reads): the checkpoints a run resumes from are read below output.dir's
# pinned handle, following no link, like its writes. A link planted between runs in place of a
# checkpoint's shard file, or of a whole step-N directory, pointing at a copy outside output.dir,
# is refused naming the link: the run does not resume from what lies outside. With job6.yaml
# (6 steps) resumed over job4.yaml's checkpoints (--resume: only max_steps differs):
#   1. the shard file of step 4 is a link (to a copy outside): step 4 is skipped with a warning
#      naming it, the run resumes from step 2 and finishes (a normal resume still works);
#   2. step 4 is a link to a directory outside and step 2 is gone: nothing readable is left, the
#      trainer stops with exit 3 naming the link, and nothing is trained or written outside.
# Before: the links were followed: run 1 resumed from the outside copy of step 4, run 2 from the
# outside directory (both "resumed from .../step-00000004").
set -uo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1
checkpointed_run "$work"
c2=$work/out/checkpoints/step-00000002
c4=$work/out/checkpoints/step-00000004
shard=shard-00000-of-00001.safetensors
[[ -f $c2/manifest.json && -f $c4/$shard ]] || fail "no checkpoints at steps 2 and 4"
mkdir -p outside
cp -r "$c4" outside/step-00000004
cp -r "$work/out" outside/out-copy
snapshot() { find "$work/outside" -type f -exec sha256sum {} + | sort; }

# 1. The shard file is a link to the outside copy.
rm "$c4/$shard"
ln -s "$work/outside/step-00000004/$shard" "$c4/$shard"
before=$(snapshot)
OMP_NUM_THREADS=1 timeout 120 "$T" train --config job6.yaml --resume >train2.log 2>&1 ||
  { cat train2.log; fail "the resume past a linked shard failed"; }
grep "skipping damaged checkpoint" train2.log
grep -q "skipping damaged checkpoint: checkpoint shard $c4/$shard is missing or unreadable: .*symbolic link" train2.log ||
  fail "the linked shard is not refused naming it"
grep -q "resumed from $c2 " train2.log || { cat train2.log; fail "the run did not resume from step 2"; }
[[ -f $work/out/checkpoints/step-00000006/manifest.json ]] || fail "no checkpoint at step 6"
[[ $(snapshot) == "$before" ]] || fail "a file outside output.dir changed"
echo "linked shard: refused, resumed from step 2, finished"

# 2. Only the step-4 directory is left, and it is a link to a directory outside.
rm -rf "$work/out/checkpoints"/step-*
ln -s "$work/outside/step-00000004" "$c4"
before=$(snapshot)
rc=0
OMP_NUM_THREADS=1 timeout 120 "$T" train --config job6.yaml --resume >train3.log 2>&1 || rc=$?
((rc == 3)) || { cat train3.log; fail "the resume over a linked step directory exited $rc, expected 3"; }
grep "error:" train3.log
grep -q "$c4 is a symbolic link; checkpoints are read below $work/out without following links" train3.log ||
  fail "the linked step directory is not refused naming it"
grep -q "resumed from" train3.log && fail "the run resumed from a linked directory"
[[ -L $c4 ]] || fail "the link was replaced"
[[ $(snapshot) == "$before" ]] || fail "a file outside output.dir changed"
echo "checkpoint_link_refused: 1 passed, 0 failed"
