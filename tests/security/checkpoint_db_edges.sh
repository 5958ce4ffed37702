#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #20, item 7, through the real binaries:
#   - a checkpoint manifest whose total is 2^62 (with ranges to match, so it still tiles) is
#     damage: the resume skips back to the previous checkpoint and the run ends with exit 0.
#     Before the fix the trainer stopped with exit 1 ("checkpoint holds 4611686018427387904
#     elements per buffer");
#   - the coordinator refuses a 0-byte --db file (before: it started an empty coordinator on it
#     without a word) and one that is not a database, each naming the file, and says when it
#     creates a new database (once: not again when it reopens it).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
T=${TRAINER:?}
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"

# ---- a manifest with total 2^62
cd "$work" || exit 1
checkpointed_run "$work"
m=out/checkpoints/step-00000004/manifest.json
[[ -f $m && -f out/checkpoints/step-00000002/manifest.json ]] || fail "no checkpoints at steps 2 and 4"
python3 - "$m" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
m["total"] = 2 ** 62
m["shards"][0]["ranges"] = [[0, 2 ** 62]]
json.dump(m, open(p, "w"))
PY
rc=0
# Two more steps: --resume, as the settings fingerprint differs (max_steps 4 -> 6).
"$T" train --config job6.yaml --resume >train2.log 2>&1 || rc=$?
((rc == 0)) || { cat train2.log; fail "the resume exited $rc instead of skipping the damaged checkpoint"; }
grep -q "skipping damaged checkpoint: .*step-00000004/manifest.json: total 4611686018427387904 contradicts" \
  train2.log || { cat train2.log; fail "no warning naming the damaged manifest"; }
grep -q "resumed from .*step-00000002 (step 2" train2.log || { cat train2.log; fail "did not resume from step 2"; }
echo "manifest with total 2^62: skipped, resumed from step 2, exit 0"

# ---- the coordinator's --db
coord() {  # DB: runs the coordinator on DB for at most 5 s; its log in $work/coord.out
  timeout 5 "$CP_COORD" --listen "127.0.0.1:$CP_PORT" --db "$1" --insecure-loopback \
    >"$work/coord.out" 2>&1
}
: >"$work/empty.db"
rc=0
coord "$work/empty.db" || rc=$?
((rc == 124)) && fail "the coordinator started on a 0-byte --db file"
((rc != 0)) || fail "the coordinator accepted a 0-byte --db file"
grep -q "$work/empty.db: empty file (0 bytes), not a coordinator database" "$work/coord.out" ||
  fail "the refusal does not name the file: $(cat "$work/coord.out")"
[[ ! -s $work/empty.db ]] || fail "the refused file was written"
head -c 8192 /dev/urandom >"$work/garbage.db"
rc=0
coord "$work/garbage.db" || rc=$?
((rc != 0 && rc != 124)) || fail "the coordinator started on a file that is not a database"
grep -q "$work/garbage.db" "$work/coord.out" || fail "the refusal does not name the file: $(cat "$work/coord.out")"
echo "refused: a 0-byte --db file and a file of random bytes, each named"

rc=0
coord "$work/new.db" || rc=$?
((rc == 124)) || fail "the coordinator on a new database did not keep running (exit $rc)"
grep -q "created a new coordinator database at $work/new.db" "$work/coord.out" ||
  fail "no line says the database was created: $(cat "$work/coord.out")"
coord "$work/new.db" || true
grep -q "created a new coordinator database" "$work/coord.out" && fail "the reopened database was reported as new"
echo "a new database is reported once"
echo "checkpoint_db_edges: 1 passed, 0 failed"
