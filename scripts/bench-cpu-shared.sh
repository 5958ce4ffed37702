#!/usr/bin/env bash
# A CPU trainer beside one busy core: for each OpenMP waiting policy, the training throughput of
# bench_cpu_train's config (a) (H256 L4 T128 B16, no PyTorch) on an idle machine and then with
# one `yes` process spinning, in the same run, and the slowdown ratio idle/busy. The issue's
# target is a ratio <= 1.5 with the default policy.
#   scripts/bench-cpu-shared.sh [--pin] [--steps N] [--config a|b] [POLICY...]
# POLICY is one of (default: all):
#   default   the trainer's own default (none of the variables below set)
#   spin      RINGMASTER_OMP_WAIT=spin: libgomp's own default (spin ~300k iterations, then sleep)
#   passive   OMP_WAIT_POLICY=passive: sleep at once
#   spin10k   GOMP_SPINCOUNT=10000: spin briefly, then sleep
#   1thread   OMP_NUM_THREADS=1 (with the default policy)
# --pin pins `yes` to CPU 0 (taskset); otherwise the kernel places it. OMP_NUM_THREADS defaults to
# the number of CPUs. Prints `uptime` before and after: other load on the machine skews both.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH=${BENCH:-${RINGMASTER_BINARY_DIR:-$ROOT/build}/trainer/bench_cpu_train}
pin=0 steps=5 config=a
policies=()
while (($#)); do
  case $1 in
    --pin) pin=1 ;;
    --steps) steps=$2; shift ;;
    --config) config=$2; shift ;;
    default | spin | passive | spin10k | 1thread) policies+=("$1") ;;
    *) echo "bench-cpu-shared.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
((${#policies[@]})) || policies=(default spin passive spin10k 1thread)
[[ -x $BENCH ]] || { echo "bench-cpu-shared.sh: $BENCH not built (ninja -C build bench_cpu_train)" >&2; exit 2; }
threads=${OMP_NUM_THREADS:-$(nproc)}
busy_pid=
trap '[[ -n $busy_pid ]] && kill "$busy_pid" 2>/dev/null || true' EXIT

# samples/s of one run under policy $1.
measure() {
  local -a env=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u RINGMASTER_OMP_WAIT OMP_NUM_THREADS="$threads")
  case $1 in
    spin) env+=(RINGMASTER_OMP_WAIT=spin) ;;
    passive) env+=(OMP_WAIT_POLICY=passive) ;;
    spin10k) env+=(GOMP_SPINCOUNT=10000) ;;
    1thread) env+=(OMP_NUM_THREADS=1) ;;
  esac
  "${env[@]}" "$BENCH" --only "$config" --no-torch --no-peak --steps "$steps" |
    awk -v c="$config" '$1 == c { print $8 }'
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs; trainer threads $threads; yes pinned: $pin"
echo "before: $(uptime)"
printf '%-9s %12s %12s %9s\n' policy "idle s/s" "busy s/s" slowdown
for p in "${policies[@]}"; do
  idle=$(measure "$p")
  if ((pin)); then taskset -c 0 yes >/dev/null & else yes >/dev/null & fi
  busy_pid=$!
  busy=$(measure "$p")
  kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true; busy_pid=
  printf '%-9s %12s %12s %8.2fx\n' "$p" "$idle" "$busy" "$(echo "$idle / $busy" | bc -l)"
done
echo "after: $(uptime)"
