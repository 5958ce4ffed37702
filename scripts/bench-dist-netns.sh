#!/usr/bin/env bash
# "P40 servers on slow Ethernet" in miniature: N ranks, each in its own network namespace
# (rmb0, rmb1, ...) with one veth link to a bridge in a namespace of its own (rmbbr), every link
# shaped with tc (default 1 Gbit/s each way, 0.5 ms one-way delay on the rank's egress). Then
#   1. bench_collectives (Gloo all-reduce, reduce-scatter, all-gather, all-to-all, 1 KiB..64 MiB);
#   2. the same small BERT job under each sharding x compression, one rank per namespace (for
#      hybrid_shard the ranks of a node share its namespace, so only cross-node traffic crosses
#      a shaped link), collecting step time, bytes per step, compression factor, dev accuracy;
#   3. a markdown report, spliced into --out (default docs/performance-distributed.md) between
#      markers named after the shaping, so prose around it and reports for other shapings stay.
#
#   sudo scripts/bench-dist-netns.sh [--ranks 4] [--rate 1gbit|none] [--delay 0.5ms|none]
#        [--quick] [--out FILE] [--build DIR] [--configs LIST] [--no-collectives] [--no-train]
#        [--coll-max-bytes B] [--epochs E] [--train-rows N] [--threads T] [--vocab-size V]
#        [--keep] [--cleanup]
#
# The job: BERT H128 L2 A4 I512, global batch 32 = ranks x micro-batch (32 / ranks, no gradient
# accumulation). --vocab-size sets the model's vocab_size (default: the generated vocab.txt's
# ~400 entries); 30522 gives bert-base-uncased's word-embedding table, of which a fine-tuning
# task touches a few rows, as in real fine-tuning: 17 MiB of fp32 gradients instead of 2 MiB.
# --configs takes sharding:compression pairs; a "+dense" suffix (no_shard:none+dense) turns
# zero-block skipping off, which is then the reference the speed-ups are measured against.
#
# Needs root (namespaces, veth, tc), iproute2 and python3 (scripts/setup.sh installs both), and
# a build with build/trainer/ringmaster-trainer and build/trainer/bench_collectives. Everything
# it creates (namespaces, links, processes, the work directory) goes away on exit, Ctrl-C or
# error. Delay needs the kernel's sch_netem; without it the delay is reported as not applied.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RANKS=4 RATE=1gbit DELAY=0.5ms QUICK=0 OUT="$ROOT/docs/performance-distributed.md"
BUILD="$ROOT/build" CONFIGS="" DO_COLL=1 DO_TRAIN=1 COLL_MAX="" EPOCHS="" TRAIN_ROWS="" THREADS=1
KEEP=0 VOCAB_SIZE=""
ALL_CONFIGS="no_shard:none no_shard:fp16 no_shard:int8 no_shard:powersgd full_shard:none \
full_shard:bf16 full_shard:int8 shard_grad_op:none hybrid_shard:none hybrid_shard:powersgd"
NS_PREFIX=rmb BR_NS=rmbbr SUBNET=10.77.0 BASE_PORT=29600

die() { echo "bench-dist-netns: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }

cleanup_only=0
while (($#)); do
  case $1 in
    --ranks) RANKS=${2:?}; shift ;;
    --rate) RATE=${2:?}; shift ;;
    --delay) DELAY=${2:?}; shift ;;
    --quick) QUICK=1 ;;
    --out) OUT=${2:?}; shift ;;
    --build) BUILD=${2:?}; shift ;;
    --configs) CONFIGS=${2:?}; shift ;;
    --no-collectives) DO_COLL=0 ;;
    --no-train) DO_TRAIN=0 ;;
    --coll-max-bytes) COLL_MAX=${2:?}; shift ;;
    --epochs) EPOCHS=${2:?}; shift ;;
    --train-rows) TRAIN_ROWS=${2:?}; shift ;;
    --threads) THREADS=${2:?}; shift ;;
    --vocab-size) VOCAB_SIZE=${2:?}; shift ;;
    --keep) KEEP=1 ;;
    --cleanup) cleanup_only=1 ;;
    -h | --help) usage 0 ;;
    *) echo "bench-dist-netns: unknown option $1" >&2; usage 2 ;;
  esac
  shift
done
[[ $RANKS =~ ^[0-9]+$ && $RANKS -ge 2 && $RANKS -le 200 ]] || die "--ranks must be 2..200"
[[ $RATE == none || $RATE =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
  die "--rate: expected none or e.g. 1gbit, 100mbit, 500kbit (got '$RATE')"
[[ $DELAY == none || $DELAY =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
  die "--delay: expected none or e.g. 0.5ms, 200us (got '$DELAY')"
[[ -z $VOCAB_SIZE || $VOCAB_SIZE =~ ^[1-9][0-9]*$ ]] || die "--vocab-size must be a positive integer"
((32 % RANKS == 0)) || die "--ranks must divide the global batch of 32 (2, 4, 8, 16 or 32)"
MICRO=$((32 / RANKS))
CONFIGS=${CONFIGS:-$ALL_CONFIGS}
CONFIGS=${CONFIGS//,/ }

if [[ $(id -u) -ne 0 ]]; then
  die "must run as root: it creates network namespaces, veth links and tc qdiscs (try: sudo $0 $*)"
fi
for tool in ip tc; do command -v "$tool" >/dev/null || die "needs iproute2 ($tool): scripts/setup.sh"; done
command -v python3 >/dev/null || die "needs python3: scripts/setup.sh"

# ---------------------------------------------------------------------------------------------
# Cleanup: our processes (by pid), then everything in our namespaces, the namespaces themselves
# (which takes their veth ends with them) and any veth end still in the root namespace.
RUN_PIDS=()
WORK=""
stop_pids() {
  local p
  ((${#RUN_PIDS[@]})) || return 0
  for p in "${RUN_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local alive=0
    for p in "${RUN_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.5
  done
  for p in "${RUN_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  RUN_PIDS=()
}
teardown() {
  local ns p i
  stop_pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns == "$BR_NS" || $ns =~ ^${NS_PREFIX}[0-9]+$ ]] || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  for ((i = 0; i < (RANKS > 16 ? RANKS : 16); i++)); do
    ip link show "${NS_PREFIX}v$i" >/dev/null 2>&1 && ip link del "${NS_PREFIX}v$i" 2>/dev/null
    ip link show "${NS_PREFIX}b$i" >/dev/null 2>&1 && ip link del "${NS_PREFIX}b$i" 2>/dev/null
  done
  if [[ -n $WORK && $KEEP == 0 ]]; then rm -rf "$WORK"; fi
  return 0
}
if ((cleanup_only)); then teardown; echo "bench-dist-netns: cleaned up"; exit 0; fi

if ip netns list 2>/dev/null | awk '{print $1}' | grep -Eq "^(${BR_NS}|${NS_PREFIX}[0-9]+)$"; then
  die "namespaces ${NS_PREFIX}* already exist: another run is in progress, or a killed run left" \
    "them (remove with: $0 --cleanup)"
fi

TRAINER=${TRAINER:-$BUILD/trainer/ringmaster-trainer}
BENCH=${BENCH:-$BUILD/trainer/bench_collectives}
[[ -x $TRAINER ]] || die "no trainer at $TRAINER (build it, or pass --build DIR)"
((DO_COLL == 0)) || [[ -x $BENCH ]] || die "no bench_collectives at $BENCH (build it, or pass --build DIR)"

trap 'teardown' EXIT
trap 'echo "bench-dist-netns: interrupted, cleaning up" >&2; exit 130' INT TERM
WORK=$(mktemp -d /tmp/bench-dist-netns.XXXXXX)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench-dist-netns: work directory $WORK"

# ---------------------------------------------------------------------------------------------
# The network.
rate_bits() {  # 1gbit -> 1000000000
  awk -v r="$1" 'BEGIN { n = r + 0; u = r; sub(/^[0-9.]+/, "", u);
    m = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1; printf "%.0f", n * m }'
}
HAVE_NETEM=0
ip netns add "$BR_NS"
ip -n "$BR_NS" link set lo up
if tc -n "$BR_NS" qdisc add dev lo root netem delay 1ms 2>/dev/null; then
  HAVE_NETEM=1
  tc -n "$BR_NS" qdisc del dev lo root
fi
DELAY_APPLIED=$DELAY
if [[ $DELAY != none && $HAVE_NETEM == 0 ]]; then
  DELAY_APPLIED=none
  echo "bench-dist-netns: WARNING: this kernel has no sch_netem qdisc: --delay $DELAY is NOT" \
    "applied (rate shaping uses tbf and works)" >&2
fi
ip -n "$BR_NS" link add br0 type bridge
ip -n "$BR_NS" link set br0 up

SHAPING_CMDS=()
shape() {  # shape NS DEV WITH_DELAY: tbf for the rate (+ netem child for the delay)
  local ns=$1 dev=$2 with_delay=$3 cmds=()
  if [[ $RATE != none ]]; then
    # Bucket: 1 ms worth of bytes, at least 32 KiB. Queue: 10 ms worth (a switch port's buffer).
    local bps burst
    bps=$(rate_bits "$RATE")
    burst=$(((bps / 8 / 1000) > 32768 ? bps / 8 / 1000 : 32768))
    cmds+=("qdisc add dev $dev root handle 1: tbf rate $RATE burst $burst latency 10ms")
    if [[ $with_delay == 1 && $DELAY_APPLIED != none ]]; then
      cmds+=("qdisc add dev $dev parent 1:1 handle 10: netem delay $DELAY limit 100000")
    fi
  elif [[ $with_delay == 1 && $DELAY_APPLIED != none ]]; then
    cmds+=("qdisc add dev $dev root netem delay $DELAY limit 100000")
  fi
  local c
  for c in "${cmds[@]}"; do
    # shellcheck disable=SC2086
    tc -n "$ns" $c
    SHAPING_CMDS+=("tc -n $ns $c")
  done
}
for ((i = 0; i < RANKS; i++)); do
  ns=$NS_PREFIX$i
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add "${NS_PREFIX}v$i" type veth peer name "${NS_PREFIX}b$i"
  ip link set "${NS_PREFIX}v$i" netns "$ns"
  ip link set "${NS_PREFIX}b$i" netns "$BR_NS"
  ip -n "$ns" link set "${NS_PREFIX}v$i" name eth0
  ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$BR_NS" link set "${NS_PREFIX}b$i" master br0
  ip -n "$BR_NS" link set "${NS_PREFIX}b$i" up
  shape "$ns" eth0 1                     # the rank's egress: rate + delay
  shape "$BR_NS" "${NS_PREFIX}b$i" 0     # its ingress (switch port -> NIC): rate
done
for ((i = 0; i < RANKS; i++)); do  # every link is up before anyone rendezvouses
  for _ in $(seq 50); do
    [[ $(ip netns exec "$NS_PREFIX$i" cat /sys/class/net/eth0/operstate) == up ]] && break
    sleep 0.1
  done
  [[ $(ip netns exec "$NS_PREFIX$i" cat /sys/class/net/eth0/operstate) == up ]] ||
    die "eth0 of $NS_PREFIX$i did not come up"
done
echo "bench-dist-netns: $RANKS namespaces up (rate $RATE, delay $DELAY_APPLIED)"

# Bytes sent by every rank namespace's eth0 so far (summed).
tx_bytes() {
  local i sum=0 b
  for ((i = 0; i < RANKS; i++)); do
    b=$(ip netns exec "$NS_PREFIX$i" cat /sys/class/net/eth0/statistics/tx_bytes)
    sum=$((sum + b))
  done
  echo "$sum"
}

# launch NS_OF_RANK_FN PORT LOGPREFIX ENV_FN -- CMD...: one process per rank, in its namespace.
# Rank r runs in namespace $(ns_of r) and listens on that namespace's address.
PORT=$BASE_PORT
launch() {
  local ns_of=$1 logs=$2 lws=$3
  shift 3
  local r ns idx
  PORT=$((PORT + 1))
  RUN_PIDS=()
  for ((r = 0; r < RANKS; r++)); do
    idx=$($ns_of "$r")
    ns=$NS_PREFIX$idx
    ip netns exec "$ns" env WORLD_SIZE="$RANKS" RANK="$r" LOCAL_RANK=$((r % lws)) \
      LOCAL_WORLD_SIZE="$lws" GROUP_RANK=$((r / lws)) GROUP_WORLD_SIZE=$((RANKS / lws)) \
      MASTER_ADDR="$SUBNET.$(($($ns_of 0) + 1))" MASTER_PORT="$PORT" \
      RINGMASTER_GLOO_IFACE="$SUBNET.$((idx + 1))" RINGMASTER_COLLECTIVE_TIMEOUT_S=180 \
      OMP_NUM_THREADS="$THREADS" timeout -k 10 900 "$@" >"$logs-$r.log" 2>&1 &
    RUN_PIDS+=($!)
  done
}
wait_all() {  # returns the number of ranks that failed
  local failed=0 p
  for p in "${RUN_PIDS[@]}"; do wait "$p" || failed=$((failed + 1)); done
  RUN_PIDS=()
  return "$failed"
}
own_ns() { echo "$1"; }

# ---------------------------------------------------------------------------------------------
# 1. Collectives.
if ((DO_COLL)); then
  coll_args=(--json "$WORK/collectives.json")
  [[ $RATE != none ]] && coll_args+=(--link-gbit "$(awk -v b="$(rate_bits "$RATE")" 'BEGIN{print b/1e9}')")
  if [[ -n $COLL_MAX ]]; then
    coll_args+=(--max-bytes "$COLL_MAX")
  elif ((QUICK)); then
    coll_args+=(--max-bytes $((4 << 20)))
  fi
  echo "bench-dist-netns: bench_collectives ${coll_args[*]}"
  launch own_ns "$WORK/coll" 1 "$BENCH" "${coll_args[@]}"
  if ! wait_all; then
    tail -n 5 "$WORK"/coll-*.log >&2
    die "bench_collectives failed (logs above)"
  fi
  cat "$WORK/coll-0.log"
fi

# ---------------------------------------------------------------------------------------------
# 2. Training runs.
# 8000 rows x 2 epochs = 500 steps: fewer leave this compositional task at chance (0.50 dev
# accuracy after 250 steps), which would make every accuracy comparison vacuous.
if ((QUICK)); then
  TRAIN_ROWS=${TRAIN_ROWS:-2000} DEV_ROWS=300 EPOCHS=${EPOCHS:-1}
else
  TRAIN_ROWS=${TRAIN_ROWS:-8000} DEV_ROWS=500 EPOCHS=${EPOCHS:-2}
fi
job_yaml() {  # $1 = output dir, $2 = sharding, $3 = compression, $4 = more distributed keys
  cat <<YAML
name: bench-dist-netns
model:
  config: {hidden_size: 128, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 512,
           max_position_embeddings: 64, hidden_dropout_prob: 0.1, attention_probs_dropout_prob: 0.1${VOCAB_SIZE:+, vocab_size: $VOCAB_SIZE}}
  vocab: $WORK/data/vocab.txt
data: {train: $WORK/data/train.tsv, eval: $WORK/data/dev.tsv, max_seq_len: 64, shuffle: true}
train: {epochs: $EPOCHS, global_batch_size: 32, micro_batch_size: $MICRO, lr: 5.0e-4, warmup_ratio: 0.06,
        seed: 42, eval_batch_size: 64}
output: {dir: $1, checkpoint_every_steps: 0, keep_checkpoints: 1}
distributed: {sharding: $2, compression: $3$4}
YAML
}
node_ns() { echo $(($1 / (RANKS / 2))); }  # hybrid_shard: 2 nodes, a namespace each

: >"$WORK/runs.jsonl"
if ((DO_TRAIN)); then
  "$TRAINER" gen-data --out "$WORK/data" --train "$TRAIN_ROWS" --dev "$DEV_ROWS" --seed 7 >/dev/null
  for cfg in $CONFIGS; do
    # A "+dense" suffix turns zero-block skipping off (distributed.skip_zero_blocks: false).
    sharding=${cfg%%:*} label=${cfg#*:}
    comp=${label%%+*} extra=
    [[ $label == *+dense ]] && extra=", skip_zero_blocks: false"
    name="${sharding}-${label/+/-}"
    lws=1 ns_of=own_ns
    if [[ $sharding == hybrid_shard ]]; then
      if ((RANKS % 2)); then
        echo "bench-dist-netns: skipping $name: hybrid_shard needs an even --ranks" >&2
        continue
      fi
      lws=$((RANKS / 2)) ns_of=node_ns
    fi
    job_yaml "$WORK/$name" "$sharding" "$comp" "$extra" >"$WORK/$name.yaml"
    echo "bench-dist-netns: training $sharding / $comp"
    tx0=$(tx_bytes)
    t0=$(date +%s.%N)
    launch "$ns_of" "$WORK/$name" "$lws" "$TRAINER" train --config "$WORK/$name.yaml"
    failed=0
    wait_all || failed=$?
    t1=$(date +%s.%N)
    tx1=$(tx_bytes)
    acc=$(sed -n 's/^dev accuracy \([0-9.]*\),.*/\1/p' "$WORK/$name-0.log" | tail -n 1)
    if ((failed)); then
      echo "bench-dist-netns: $name: $failed rank(s) failed:" >&2
      tail -n 3 "$WORK/$name"-*.log >&2
    fi
    printf '{"name":"%s","sharding":"%s","compression":"%s","failed":%d,"accuracy":"%s",' \
      "$name" "$sharding" "$label" "$failed" "$acc" >>"$WORK/runs.jsonl"
    printf '"tx_bytes":%d,"wall_s":%s,"dir":"%s","ns_per_node":%d}\n' "$((tx1 - tx0))" \
      "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')" "$WORK/$name" \
      "$([[ $ns_of == node_ns ]] && echo 1 || echo 0)" >>"$WORK/runs.jsonl"
    echo "bench-dist-netns: $name: dev accuracy ${acc:-?}, wall $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s"
  done
fi

# ---------------------------------------------------------------------------------------------
# 3. Report.
printf '%s\n' "${SHAPING_CMDS[@]}" >"$WORK/shaping.txt"
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1) \
  RANKS=$RANKS RATE=$RATE DELAY=$DELAY DELAY_APPLIED=$DELAY_APPLIED QUICK=$QUICK EPOCHS=$EPOCHS \
  THREADS=$THREADS VOCAB_SIZE=$VOCAB_SIZE MICRO=$MICRO TRAIN_ROWS=$TRAIN_ROWS DEV_ROWS=$DEV_ROWS LOAD_START=$LOAD_START \
  LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg) \
  python3 - "$WORK" "$OUT" <<'PY'
import json, os, re, sys, datetime
work, out = sys.argv[1], sys.argv[2]
E = os.environ
ranks, rate, delay, delay_applied = int(E["RANKS"]), E["RATE"], E["DELAY"], E["DELAY_APPLIED"]
quick, epochs, threads = int(E["QUICK"]), E["EPOCHS"], E["THREADS"]
train_rows, dev_rows = E["TRAIN_ROWS"], E["DEV_ROWS"]
vocab_size, micro = E["VOCAB_SIZE"], int(E["MICRO"])
cpu, nproc = E["CPU"], os.cpu_count()
mem = next(f"{int(l.split()[1]) / 2**20:.0f} GiB" for l in open("/proc/meminfo") if l.startswith("MemTotal"))
shaping = [l for l in open(os.path.join(work, "shaping.txt")).read().splitlines() if l.strip()]

def mib(b): return f"{b / 2**20:.2f} MiB"
def human(b):
    for unit, k in (("MiB", 2**20), ("KiB", 2**10)):
        if b >= k and b % k == 0: return f"{b // k} {unit}"
    return f"{b} B"

lines = []
key = (f"ranks={ranks} rate={rate} delay={delay}" + (f" vocab={vocab_size}" if vocab_size else "")
       + (" quick" if quick else ""))
today = datetime.date.today().isoformat()
lines.append(f"<!-- bench-dist-netns: {key} -->")
lines.append(f"### {ranks} ranks, link {rate if rate != 'none' else 'unshaped'}, "
             f"delay {delay_applied if delay_applied != 'none' else 'none'}"
             f"{f', vocab_size {vocab_size}' if vocab_size else ''}"
             f"{' (--quick)' if quick else ''} — measured {today}")
lines.append("")
lines.append(f"- Machine: {nproc} cores ({cpu}), {mem}, kernel {os.uname().release}; "
             f"{ranks} ranks at OMP_NUM_THREADS={threads} share these cores. Load average "
             f"(1/5/15 min) at start {E['LOAD_START']}, at end {E['LOAD_END']}.")
if rate != "none":
    lines.append(f"- Links: each rank's veth is shaped with tbf to {rate} in both directions "
                 f"(rank egress and bridge-port egress); bucket 1 ms of traffic (min 32 KiB), "
                 f"queue 10 ms.")
else:
    lines.append("- Links: veth pairs through a Linux bridge, not rate-limited.")
if delay == "none":
    lines.append("- Delay: none requested.")
elif delay_applied == "none":
    lines.append(f"- Delay: {delay} was requested but NOT applied: this kernel has no sch_netem.")
else:
    lines.append(f"- Delay: netem {delay} on each rank's egress (one way; RTT = 2x).")
mine = [c for c in shaping if " rmb0 " in c or c.endswith(" rmbb0") or " rmbb0 " in c]
if mine:
    lines.append("- tc, for rank 0's link (the others alike): " +
                 "; ".join(f"`{c}`" for c in mine))
lines.append(f"- Command: `sudo scripts/bench-dist-netns.sh --ranks {ranks} --rate {rate} "
             f"--delay {delay}{f' --vocab-size {vocab_size}' if vocab_size else ''}"
             f"{' --quick' if quick else ''}`")
lines.append("")

coll = os.path.join(work, "collectives.json")
if os.path.exists(coll):
    c = json.load(open(coll))
    link = c.get("link_gbit") or 0
    lines.append("#### Collectives (bench_collectives, Gloo TCP, fp32)")
    lines.append("")
    lines.append("time = slowest rank's mean over back-to-back iterations after warm-up; "
                 "GB/s = 1e9 B/s; busbw by nccl-tests' conventions"
                 + (f"; % link = busbw / ({link:g} Gbit/s / 8)" if link else "") + ".")
    lines.append("")
    lines.append("| op | size | iters | time (µs) | algbw (GB/s) | busbw (GB/s) |"
                 + (" % link |" if link else "") + " #wrong |")
    lines.append("|---|---:|---:|---:|---:|---:|" + ("---:|" if link else "") + "---:|")
    for r in c["rows"]:
        pct = f" {100 * r['busbw_GBps'] / (link / 8):.0f}% |" if link else ""
        lines.append(f"| {r['op']} | {human(r['bytes'])} | {r['iters']} | {r['time_us']:.0f} | "
                     f"{r['algbw_GBps']:.4f} | {r['busbw_GBps']:.4f} |{pct} {r['wrong']} |")
    lines.append("")

runs = [json.loads(l) for l in open(os.path.join(work, "runs.jsonl")) if l.strip()]
rows = []
for run in runs:
    st = []
    rd = os.path.join(run["dir"], "ranks")
    for r in range(ranks):
        p = os.path.join(rd, f"rank-{r}.json")
        if os.path.exists(p): st.append(json.load(open(p)))
    row = dict(run)
    if run["failed"] or len(st) != ranks:
        row["ok"] = False
    else:
        row["ok"] = True
        r0 = next(s for s in st if s["rank"] == 0)
        steps = r0["steps"]
        row["steps"] = steps
        row["step_ms"] = 1000 * r0["train_seconds"] / steps
        gather = sum(s["gather_bytes"] for s in st)
        rw = sum(s["reduce_wire_bytes"] for s in st)
        rr = sum(s["reduce_raw_bytes"] for s in st)
        row["wire"] = (gather + rw) / steps
        row["raw"] = (gather + rr) / steps
        row["factor"] = rr / rw if rw else float("nan")
        row["tx"] = run["tx_bytes"] / steps
    rows.append(row)
# The reference of each sharding: uncompressed and dense ("none+dense", what DDP and FSDP send)
# when it ran, else "none".
base = {r["sharding"]: r for r in rows if r["ok"] and r["compression"] == "none"}
base.update({r["sharding"]: r for r in rows if r["ok"] and r["compression"] == "none+dense"})

if rows:
    lines.append("#### Training (same job under each sharding x compression)")
    lines.append("")
    vocab = (f"vocab_size {vocab_size} (the data uses the generated vocab.txt's first rows)"
             if vocab_size else "vocab_size from the generated vocab.txt")
    lines.append(f"Job: BERT H128 L2 A4 I512, {vocab}, max_seq_len 64, generated data ({train_rows} "
                 f"train / {dev_rows} dev rows, seed 7), {epochs} epoch(s), global batch 32 = {ranks} "
                 f"ranks x micro-batch {micro}, AdamW lr 5e-4, dropout 0.1, seed 42. hybrid_shard: 2 nodes x "
                 f"{ranks // 2} ranks, a node's ranks share one namespace (intra-node traffic on "
                 f"its loopback, unshaped).")
    lines.append("")
    lines.append("- step = rank 0's train_seconds / steps (includes the end-of-epoch evaluation).")
    lines.append("- wire/step = sum over ranks of gather_bytes + reduce_wire_bytes (the trainer's "
                 "counters, payload only) / steps; raw/step = the same with reduce_raw_bytes "
                 "(what the reductions would send in fp32).")
    lines.append("- ×comp = reduce_raw_bytes / reduce_wire_bytes (reductions only).")
    lines.append("- link tx/step = bytes sent by all rank namespaces' eth0 (measured by the kernel: "
                 "headers, rendezvous, evaluation, the final gather included) / steps: the "
                 "cross-node traffic.")
    lines.append("- vs none: against the same sharding without compression (bytes: link tx); "
                 "against none+dense when that row ran. \"+dense\": zero-block skipping off "
                 "(distributed.skip_zero_blocks: false), every block sent as DDP and FSDP do.")
    lines.append("")
    lines.append("| sharding | compression | step (ms) | speed-up vs none | wire/step | raw/step "
                 "| ×comp | link tx/step | link bytes vs none | dev acc | Δacc vs none |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if not r["ok"]:
            lines.append(f"| {r['sharding']} | {r['compression']} | failed ({r['failed']} "
                         f"rank(s)) | | | | | | | | |")
            continue
        b = base.get(r["sharding"])
        speed = f"{b['step_ms'] / r['step_ms']:.2f}×" if b else "-"
        cut = f"{b['tx'] / r['tx']:.2f}×" if b else "-"
        acc = r["accuracy"]
        dacc = (f"{100 * (float(acc) - float(b['accuracy'])):+.1f} pt"
                if b and acc and b["accuracy"] else "-")
        lines.append(f"| {r['sharding']} | {r['compression']} | {r['step_ms']:.1f} | {speed} | "
                     f"{mib(r['wire'])} | {mib(r['raw'])} | {r['factor']:.2f} | {mib(r['tx'])} | "
                     f"{cut} | {acc or '?'} | {dacc} |")
    lines.append("")
lines.append(f"<!-- /bench-dist-netns: {key} -->")
section = "\n".join(lines) + "\n"
print()
print(section)

text = open(out).read() if os.path.exists(out) else "# Distributed training performance\n\n"
begin, end = f"<!-- bench-dist-netns: {key} -->", f"<!-- /bench-dist-netns: {key} -->"
if begin in text and end in text:
    a = text.index(begin)
    z = text.index(end) + len(end)
    if text[z:z + 1] == "\n": z += 1
    text = text[:a] + section + text[z:]
else:
    text = text.rstrip("\n") + "\n\n" + section
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
with open(out, "w") as f: f.write(text)
print(f"bench-dist-netns: report written to {out}")
PY
