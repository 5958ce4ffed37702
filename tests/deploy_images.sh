#!/usr/bin/env bash
# ctest-labels: deploy;serial
# A cluster in containers (issue #22): the images scripts/build-images.sh builds, run with podman
# on a private network with mutual TLS and both tokens, as k8s/ and helm/ run them. The
# coordinator container starts with its image's default command (credentials mounted at
# /etc/ringmaster/credentials); two CPU agent containers start with the manifests' agent flags
# (ringmaster-trainer-launch, /var/lib/ringmaster/agent, /shared); a third container runs the CLI
# and submits a two-node job whose Gloo ranks talk between the agent containers. Mid-run agent b's
# container is killed (SIGKILL, as a node or pod dies) and started again: generation 1 must run
# on both nodes, resume from a checkpoint no older than the newest committed before the kill, and
# the job must succeed. Each container's /metrics must then answer with the series the scrape
# jobs expect (the coordinator's job counts, the agents' connection and rank starts).
# Also checked: the images the manifests name exist and run as uid 10001, the coordinator image's
# entrypoint and command are docker/coordinator.Dockerfile's, and the CPU agent image holds no
# CUDA library.
#
# Skips (77) unless podman works here and both images are built: building them takes minutes
# (docs/operations.md, "Images built with podman"), which the default test run does not spend.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$here/.." && pwd)}
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"  # make_ca, make_cert, wait_until, committed_step
# shellcheck source=lib/resume_job.sh
source "$here/lib/resume_job.sh"  # resume_job, check_resumed
skip() { echo "SKIP: $*"; exit 77; }
containers=()
work=""
logs() {
  local c
  for c in "${containers[@]}"; do
    echo "--- $c"
    podman logs --tail 20 "$c" 2>&1 || true
  done
  [[ -n $work ]] && find "$work/shared" -name 'rank-*.log' 2>/dev/null | while read -r f; do
    echo "--- $f"
    tail -n 10 "$f"
  done
}
fail() { echo "FAIL: $*"; logs; exit 1; }

command -v podman >/dev/null || skip "podman is not installed"
command -v openssl >/dev/null || skip "needs openssl"
command -v curl >/dev/null || skip "needs curl"
podman info >/dev/null 2>&1 || skip "podman does not work here ($(podman info 2>&1 | tail -n 1))"
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/helm/ringmaster/Chart.yaml")
coord_image=ringmaster/coordinator:$version
agent_image=ringmaster/agent:$version-cpu
for i in "$coord_image" "$agent_image"; do
  podman image exists "$i" || skip "image $i not built (scripts/build-images.sh; minutes)"
done
# Only images of the build under test: older images would test older code.
bin=${RINGMASTER_BINARY_DIR:-$ROOT/build}
built_from() { podman image inspect --format '{{index .Labels "org.ringmaster.binaries"}}' "$1"; }
want_coord=$(cat "$bin/coordinator/ringmaster-coordinator" "$bin/cli/ringmaster" | sha256sum | cut -c1-16)
want_agent=$(cat "$bin/agent/ringmaster-agent" "$bin/trainer/ringmaster-trainer" "$bin/cli/ringmaster" |
  sha256sum | cut -c1-16)
[[ $(built_from "$coord_image") == "$want_coord" && $(built_from "$agent_image") == "$want_agent" ]] ||
  skip "the images were not built from $bin's binaries (scripts/build-images.sh $bin)"

# The names the manifests use are the names built.
grep -q "image: $coord_image\$" "$ROOT/k8s/coordinator-statefulset.yaml" ||
  fail "k8s/coordinator-statefulset.yaml does not run $coord_image"
grep -q 'printf "%s-cpu" .ctx.Chart.AppVersion' "$ROOT/helm/ringmaster/templates/_helpers.tpl" ||
  fail "the chart's CPU agent image is no longer <appVersion>-cpu"
grep -A1 '^  cpuAgent:' "$ROOT/helm/ringmaster/values.yaml" | grep 'repository: ringmaster/agent$' >/dev/null ||
  fail "the chart's images.cpuAgent.repository is not ringmaster/agent"

read -r -a run_flags <<<"$("$ROOT/scripts/build-images.sh" --run-flags)"
id=$$
net=ringmaster-test-$id
work=$(mktemp -d)
cleanup() {
  local c
  for c in "${containers[@]}"; do podman rm -f -t 5 "$c" >/dev/null 2>&1 || true; done
  podman network rm -f "$net" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# ---- image contents: non-root, binaries resolve their libraries, no CUDA in the CPU agent
for i in "$coord_image" "$agent_image"; do
  [[ $(podman image inspect --format '{{.Config.User}}' "$i") == 10001:10001 ]] || fail "$i does not run as 10001"
done
# The coordinator image starts as docker/coordinator.Dockerfile's does (entrypoint, command).
for field in Entrypoint Cmd; do
  want=$(awk -v k="${field^^}" '$1 == k {f = 1} f {sub(/\\$/, ""); printf "%s", $0} f && /\]$/ {exit}' \
    "$ROOT/docker/coordinator.Dockerfile" | sed 's/^[A-Z]* //' | tr -d ' ')
  got=$(podman image inspect --format "{{json .Config.$field}}" "$coord_image")
  [[ -n $want && $got == "$want" ]] || fail "$coord_image's $field $got is not the Dockerfile's $want"
done
podman run --rm "${run_flags[@]}" --network none --entrypoint /usr/local/bin/ringmaster-coordinator \
  "$coord_image" --version >/dev/null || fail "the coordinator in $coord_image does not start"
for b in ringmaster-agent ringmaster-trainer ringmaster; do
  podman run --rm "${run_flags[@]}" --network none --entrypoint "/usr/local/bin/$b" "$agent_image" \
    --help >/dev/null || fail "$b in $agent_image does not start"
done
if podman run --rm "${run_flags[@]}" --network none --entrypoint /bin/sh "$agent_image" -c \
  'ls /usr/lib/x86_64-linux-gnu /usr/local/lib 2>/dev/null | grep -E "^lib(cudart|cublas|nccl)"'; then
  fail "$agent_image holds CUDA libraries"
fi
echo "images: $coord_image, $agent_image; uid 10001; binaries start; no CUDA in the agent image"

# ---- network and credentials
podman network create "$net" >/dev/null
subnet=$(podman network inspect --format '{{range .Subnets}}{{.Subnet}} {{end}}' "$net" | awk '{print $1}')
[[ $subnet =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.0/24$ ]] || fail "unexpected subnet '$subnet' of $net"
prefix=${BASH_REMATCH[1]}
coord_ip=$prefix.10
declare -A agent_ip=([a]=$prefix.11 [b]=$prefix.12)

tls=$work/tls
make_ca "$tls"
make_cert "$tls" server ringmaster-coordinator "subjectAltName=IP:$coord_ip
extendedKeyUsage=serverAuth"
make_cert "$tls" client ringmaster-client "extendedKeyUsage=clientAuth"
(umask 077; openssl rand -hex 24 >"$tls/join.token"; openssl rand -hex 24 >"$tls/submit.token")
# One folder per container, named as the manifests mount the Secret.
mkdir -p "$work/coord-creds" "$work/agent-creds" "$work/cli-creds" "$work/shared/agent-a" "$work/shared/agent-b"
cp "$tls/server.crt" "$work/coord-creds/tls.crt"
cp "$tls/server.key" "$work/coord-creds/tls.key"
cp "$tls/join.token" "$work/coord-creds/join-token"
cp "$tls/submit.token" "$work/coord-creds/submit-token"
cp "$tls/client.crt" "$work/agent-creds/tls.crt"
cp "$tls/client.key" "$work/agent-creds/tls.key"
cp "$tls/join.token" "$work/agent-creds/join-token"
cp "$tls/client.crt" "$tls/client.key" "$work/cli-creds/"
cp "$tls/submit.token" "$work/cli-creds/submit-token"
for d in coord-creds agent-creds cli-creds; do cp "$tls/ca.crt" "$work/$d/"; done
chmod 0400 "$work"/*-creds/*
chown -R 10001:10001 "$work"/*-creds "$work/shared"

# The node's trainer settings, read by ringmaster-trainer-launch (k8s: a ConfigMap): every rank
# ~20x slower than this CPU can go, so that the kill lands mid-job.
printf 'RINGMASTER_SLOWDOWN=20\nRINGMASTER_COLLECTIVE_TIMEOUT_S=30\n' >"$work/trainer.env"
chmod 0444 "$work/trainer.env"

start=$SECONDS
# ---- the coordinator: the image's default command
containers+=("ringmaster-coordinator-$id")
podman run -d --name "ringmaster-coordinator-$id" "${run_flags[@]}" --network "$net" --ip "$coord_ip" \
  -v "$work/coord-creds:/etc/ringmaster/credentials:ro" "$coord_image" >/dev/null
cli() {  # the CLI in its own container, with the client certificate and the submit token
  podman run --rm "${run_flags[@]}" --network "$net" -v "$work/cli-creds:/etc/ringmaster/client:ro" \
    -v "$work/shared:/shared" -e "RINGMASTER_COORDINATOR=$coord_ip:7070" \
    -e RINGMASTER_TLS_CA=/etc/ringmaster/client/ca.crt -e RINGMASTER_TLS_CERT=/etc/ringmaster/client/client.crt \
    -e RINGMASTER_TLS_KEY=/etc/ringmaster/client/client.key \
    -e RINGMASTER_TOKEN_FILE=/etc/ringmaster/client/submit-token \
    --entrypoint /usr/local/bin/ringmaster "$coord_image" "$@"
}
wait_until 60 "the coordinator container to answer the CLI" cli nodes || fail "no coordinator"
coord_logged() { grep -q "$1" <<<"$(podman logs "ringmaster-coordinator-$id" 2>&1)"; }
coord_logged "mutual TLS, join token required, submit token required" ||
  fail "the coordinator container does not run mutual TLS with both tokens"

# ---- two agents: the manifests' flags
for n in a b; do
  containers+=("ringmaster-agent-$n-$id")
  podman run -d --name "ringmaster-agent-$n-$id" "${run_flags[@]}" --network "$net" --ip "${agent_ip[$n]}" \
    -v "$work/agent-creds:/etc/ringmaster/credentials:ro" -v "$work/shared:/shared" \
    -v "$work/shared/agent-$n:/var/lib/ringmaster/agent" -v "$work/trainer.env:/etc/ringmaster/trainer.env:ro" \
    -e OMP_NUM_THREADS=1 \
    "$agent_image" --coordinator="$coord_ip:7070" --trainer=/usr/local/bin/ringmaster-trainer-launch \
    --work-dir=/var/lib/ringmaster/agent --name="$n" --address="${agent_ip[$n]}" \
    --metrics-listen=0.0.0.0:9401 --metrics-insecure-public --throughput=off \
    --tls-ca=/etc/ringmaster/credentials/ca.crt --tls-cert=/etc/ringmaster/credentials/tls.crt \
    --tls-key=/etc/ringmaster/credentials/tls.key \
    --join-token-file=/etc/ringmaster/credentials/join-token >/dev/null
done
two_ready() { (($(cli nodes | grep -c ' Ready') >= 2)); }
wait_until 60 "both agent containers Ready" two_ready || { cli nodes || true; fail "agents not Ready"; }
echo "cluster: coordinator $coord_ip, agents a ${agent_ip[a]} and b ${agent_ip[b]}: Ready over mutual TLS ($((SECONDS - start)) s)"

# ---- a two-node job from the CLI container (data made by the image's trainer); agent b's
# container is killed mid-run and started again, as a DaemonSet would: the job must resume from a
# checkpoint no older than the newest committed before the kill, and succeed.
podman run --rm "${run_flags[@]}" --network none -v "$work/shared:/shared" \
  --entrypoint /usr/local/bin/ringmaster-trainer "$agent_image" \
  gen-data --out /shared/data --train 400 --dev 40 --seed 5 >/dev/null || fail "gen-data in the agent image"
steps=40
# shellcheck disable=SC2034  # read by resume_job.sh
CP_WORK=$work/shared RJ_NAME=images-cluster RJ_STEPS=$steps RJ_SHARDING=full_shard RJ_NODES=2 RJ_RESTARTS=3
resume_job out >/dev/null
chown -R 10001:10001 "$work/shared"
job=$(cli submit /shared/out.yaml) || fail "submit from the CLI container"
field() { cli status "$job" 2>/dev/null | sed -n "s/^$1: *//p"; }
committed_at() { committed_at_least "$work/shared/out" "$1"; }
ended() { [[ $(field phase) =~ Succeeded|Failed|Cancelled ]]; }
progress_or_end() { committed_at 8 || ended; }
wait_until 180 "a checkpoint at step 8" progress_or_end || fail "no progress"
[[ $(field phase) == Running ]] || { cli status "$job" || true; fail "job $job is $(field phase) before the kill"; }
c1=$(committed_step "$work/shared/out")
podman kill -s KILL "ringmaster-agent-b-$id" >/dev/null
echo "killed agent b's container at committed step $c1 ($((SECONDS - start)) s)"
podman start "ringmaster-agent-b-$id" >/dev/null
running_gen1() { [[ $(field phase) == Running && $(field generation) -ge 1 ]]; }
wait_until 120 "generation 1 running" running_gen1 || { cli status "$job" || true; fail "no restart after the kill"; }
check_resumed "$job" 1 "$c1"
((RJ_FAIL == 0)) || fail "generation 1 did not resume from the newest checkpoint"
wait_until 300 "job $job to end" ended || fail "job $job did not end"
[[ $(field phase) == Succeeded ]] || { cli status "$job" || true; fail "job $job did not succeed"; }
(($(committed_step "$work/shared/out") == steps)) ||
  fail "the last checkpoint under /shared/out is not step $steps"
coord_logged "job $job: generation 1 running 2 ranks on 2 nodes" ||
  fail "the coordinator did not run generation 1 on both nodes"
echo "job $job: Succeeded, generation 1 on both nodes after the kill, $(field restarts) restarts ($((SECONDS - start)) s)"

# ---- /metrics from the containers, as Prometheus scrapes them
metric_value() {  # URL SERIES: the value of the sample whose name and labels start with SERIES
  local page
  page=$(curl -sf --max-time 10 "$1") || { echo "FAIL: no /metrics at $1" >&2; return 0; }
  awk -v s="$2" 'index($0, s) == 1 && !found {print $NF; found = 1}' <<<"$page"
}
v=$(metric_value "http://$coord_ip:9400/metrics" 'ringmaster_jobs{phase="succeeded"}')
[[ $v == 1 ]] || fail "coordinator /metrics: ringmaster_jobs{phase=\"succeeded\"} is '$v', not 1"
v=$(metric_value "http://$coord_ip:9400/metrics" 'ringmaster_coordinator_start_time_seconds')
[[ -n $v ]] || fail "coordinator /metrics has no ringmaster_coordinator_start_time_seconds"
for n in a b; do
  url=http://${agent_ip[$n]}:9401/metrics
  v=$(metric_value "$url" "ringmaster_agent_connected{node=\"$n\"}")
  [[ $v == 1 ]] || fail "agent $n /metrics: ringmaster_agent_connected is '$v'"
  v=$(metric_value "$url" "ringmaster_agent_rank_starts_total{node=\"$n\"}")
  if [[ -z $v ]] || ! awk -v v="$v" 'BEGIN {exit !(v >= 1)}'; then
    fail "agent $n /metrics: ringmaster_agent_rank_starts_total is '$v'"
  fi
done
echo "/metrics: coordinator (1 job succeeded), agents a and b (connected, ranks started)"
echo "deploy_images: 1 passed, 0 failed ($((SECONDS - start)) s of containers)"
