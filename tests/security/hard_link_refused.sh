#!/usr/bin/env bash
# ctest-labels: security
# Issue #31, finding 6b: a hard link to a file outside the allowed root cannot be told from a
# file of its own, and the trainer followed two of them (run here as an agent with
# --allowed-root runs it: RINGMASTER_ALLOWED_ROOT names the root):
#   (a) metrics.jsonl planted as a hard link to a file outside: before the fix the run appended
#       its 5-6 metric lines to the outside file and exited 0. Now the run stops at start-up as
#       the job's fault (exit 3) naming the hard links, and the outside file is unchanged.
#   (b) the model's vocab.txt a hard link to a file outside: before the fix it was read (the
#       run trained with the outside vocabulary). Now exit 3 naming the file and its links.
# Both files lie on the same filesystem as the root (a hard link cannot cross one).
set -uo pipefail
T=${TRAINER:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
root=$work/root outside=$work/outside
mkdir -p "$root" "$outside"
checkpoint_jobs "$root"
cd "$root" || exit 1
run() { RINGMASTER_ALLOWED_ROOT=$root OMP_NUM_THREADS=1 timeout 120 "$T" train "$@"; }

# ---- (a) metrics.jsonl a hard link to a file outside
echo '{"outside": "keep"}' >"$outside/victim.jsonl"
mkdir -p "$root/out"
ln "$outside/victim.jsonl" "$root/out/metrics.jsonl"
rc=0
run --config job4.yaml >metrics.log 2>&1 || rc=$?
[[ $(cat "$outside/victim.jsonl") == '{"outside": "keep"}' ]] ||
  fail "the outside file was appended to: $(wc -l <"$outside/victim.jsonl") lines"
((rc == 3)) || { cat metrics.log; fail "the run with a hard-linked metrics.jsonl exited $rc, expected 3"; }
grep -q "error: .*metrics.jsonl has 2 hard links" metrics.log || { cat metrics.log; fail "the error does not name the hard link"; }
echo "(a) metrics.jsonl hard-linked outside: exit 3, the outside file unchanged"
rm -rf "$root/out"

# ---- (b) the vocab a hard link to a file outside
mv "$root/data/vocab.txt" "$outside/vocab.txt"
ln "$outside/vocab.txt" "$root/data/vocab.txt"
rc=0
run --config job4.yaml >vocab.log 2>&1 || rc=$?
((rc == 3)) || { cat vocab.log; fail "the run with a hard-linked vocab exited $rc, expected 3"; }
grep -q "error: .*data/vocab.txt: has 2 hard links" vocab.log || { cat vocab.log; fail "the error does not name the hard-linked vocab"; }
[[ ! -d $root/out/checkpoints ]] || fail "the run trained with the outside vocab"
echo "(b) vocab.txt hard-linked outside: exit 3, not read"

# A copy instead of the link trains.
rm "$root/data/vocab.txt"
cp "$outside/vocab.txt" "$root/data/vocab.txt"
run --config job4.yaml >plain.log 2>&1 || { cat plain.log; fail "the run with plain files failed"; }
[[ -s $root/out/metrics.jsonl && -f $root/out/checkpoints/step-00000004/manifest.json ]] ||
  fail "the plain run wrote no metrics or checkpoint"
echo "hard_link_refused: 1 passed, 0 failed"
