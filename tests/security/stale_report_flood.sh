#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, finding 9 (stale reports): a join-token holder reporting an ended job's ranks as
# running, each report with a new generation number, makes the coordinator queue one StopRanks
# for that job, not one per number, and its memory stays bounded. The rogue agent registers,
# sends 200,000 such reports (1,000 a message), then one report of a second ended job whose
# StopRanks comes after every StopRanks of the flood (one outbox, in order), so the count is
# exact, and the coordinator's peak memory (VmHWM) may grow by less than 40 MiB. Before: 200,000
# StopRanks were queued and sent and VmHWM grew by 62 MiB (19 -> 84 MB; 1M reports took RSS
# 64 -> 412 MB in the probe).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
security_rogue
start_coordinator
tiny_job "$work"
cd "$work"
ids=()
for i in 1 2; do
  id=$("$CP_CLI" submit job.yaml) || fail "submit failed"
  "$CP_CLI" cancel "$id" >/dev/null || fail "cancel of $id failed"
  ids+=("$id")
done
kb() {  # FIELD: the coordinator's /proc status field in kB
  local v
  v=$(sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$COORD_PID/status")
  [[ -n $v ]] || fail "no $1 in /proc/$COORD_PID/status"
  echo "$v"
}
hwm_before=$(kb VmHWM)
rc=0
timeout 120 "$ROGUE" stale-flood --name flood --address 127.0.0.1 --job "${ids[0]}" \
  --marker-job "${ids[1]}" --reports 200000 >rogue.out 2>&1 || rc=$?
cat rogue.out
((rc == 0)) || fail "the flood did not end with the marker's StopRanks (rogue exit $rc)"
stops=$(sed -n "s/^stop_ranks for ${ids[0]}: \([0-9]*\) .*/\1/p" rogue.out)
[[ -n $stops ]] || fail "no StopRanks count"
((stops == 1)) || fail "$stops StopRanks for 200000 stale reports of one ended job (expected 1)"
hwm_after=$(kb VmHWM)
grown=$(((hwm_after - hwm_before) / 1024))
echo "VmHWM ${hwm_before} kB -> ${hwm_after} kB (+${grown} MiB), VmRSS $(kb VmRSS) kB"
((grown < 40)) || fail "the coordinator's peak memory grew by $grown MiB"
echo "stale_report_flood: 1 passed, 0 failed"
