#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, findings 8, 9 and 10 (Register): a join-token holder can no longer store megabytes
# per registration nor register without bound.
#   - Two Registers with GPU names of 2,000,000 and 4,089,446 bytes are refused with
#     INVALID_ARGUMENT naming the field and the 256-byte cap; `ringmaster nodes` keeps working and
#     the database stays small. Before: both were stored, ListNodes' first page (cut only after
#     it held 2 MiB) was 6.09 MB, and `ringmaster nodes` failed ("Received message larger than
#     max (6089626 vs. 4194304)") until the nodes were forgotten (24 h).
#   - Registers from one host are rate-limited (--register-rate 2: bursts of 20): a burst of 40
#     is cut with RESOURCE_EXHAUSTED after at most 39, and the refusal is counted. Before: no
#     limit (all 40 accepted).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
start_coordinator --register-rate 2

for bytes in 2000000 4089446; do
  rc=0
  "$ROGUE" register --name "huge$bytes" --address 127.0.0.1 --gpu-name-bytes "$bytes" \
    >"$work/rogue.out" 2>&1 || rc=$?
  head -c 300 "$work/rogue.out"
  echo
  ((rc == 2)) || fail "a GPU name of $bytes bytes was accepted (rogue exit $rc)"
  grep -q "^refused: 3: register: GPU 0 name is $bytes bytes; at most 256 are accepted" \
    "$work/rogue.out" || fail "the refusal of a $bytes-byte GPU name does not name the cap"
done
"$CP_CLI" nodes >"$work/nodes.out" 2>&1 || { tail -c 300 "$work/nodes.out"; fail "ringmaster nodes failed"; }
size=$(($(stat -c %s "$work/coord.db") + $(stat -c %s "$work/coord.db-wal" 2>/dev/null || echo 0)))
((size < 1048576)) || fail "the database grew to $size bytes"
"$ROGUE" register --name fits --address 127.0.0.1 --gpu-name-bytes 256 >"$work/rogue.out" 2>&1 ||
  fail "a GPU name of 256 bytes was refused: $(cat "$work/rogue.out")"
"$CP_CLI" nodes | grep -q "^fits " || fail "the node at the cap is not listed"
echo "huge GPU names refused; ringmaster nodes works; database $size bytes"

rc=0
"$ROGUE" register --name burst --address 127.0.0.1 --repeat 40 >"$work/rogue.out" 2>&1 || rc=$?
cat "$work/rogue.out"
((rc == 2)) || fail "40 Registers in a row were all accepted (rogue exit $rc)"
grep -q "^refused: 8: register: more than 2 registrations a second (burst 20) from this host" \
  "$work/rogue.out" || fail "the burst was not refused with RESOURCE_EXHAUSTED naming the rate"
n=$(sed -n 's/^registered: \([0-9]*\) nodes/\1/p' "$work/rogue.out")
((n >= 15 && n < 40)) || fail "$n Registers accepted before the refusal"
grep -q "refused AgentService/Register from .*--register-rate" "$work/coordinator.log" ||
  fail "the rate refusal is not logged"
echo "register rate: $n of 40 accepted, then RESOURCE_EXHAUSTED"
echo "register_field_caps: 1 passed, 0 failed"
