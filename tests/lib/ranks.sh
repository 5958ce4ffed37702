# Launching several trainer ranks on this host the way torchrun does (sourced by tests).
#
# launch_ranks WORLD NODES JOB LOGPREFIX [EXTRA_ENV...]
#   Starts WORLD ranks (WORLD / NODES per "node") of `$TRAINER train --config JOB` in the
#   background with the torchrun environment, rendezvous through a fresh directory store, one
#   OpenMP thread each. Sets RANK_PIDS to their pids. Logs go to LOGPREFIX-<rank>.log.
# wait_ranks: waits for RANK_PIDS; returns the number of ranks that failed.
launch_ranks() {
  local world=$1 nodes=$2 job=$3 logs=$4
  shift 4
  local lws=$((world / nodes)) store
  store=$(mktemp -d)
  RANK_PIDS=()
  for ((r = 0; r < world; r++)); do
    env WORLD_SIZE="$world" RANK="$r" LOCAL_RANK=$((r % lws)) LOCAL_WORLD_SIZE="$lws" \
      GROUP_RANK=$((r / lws)) GROUP_WORLD_SIZE="$nodes" RINGMASTER_STORE_DIR="$store" \
      RINGMASTER_COLLECTIVE_TIMEOUT_S="${COLLECTIVE_TIMEOUT_S:-60}" OMP_NUM_THREADS=1 "$@" \
      "${TRAINER:?}" train --config "$job" >"$logs-$r.log" 2>&1 &
    RANK_PIDS+=($!)
  done
}

wait_ranks() {
  local failed=0 p
  for p in "${RANK_PIDS[@]}"; do wait "$p" || failed=$((failed + 1)); done
  return "$failed"
}
