# A control plane started piece by piece, for tests that kill and restart its parts (sourced).
#
#   cluster_init WORKDIR          binaries from $RINGMASTER_BINARY_DIR; picks a free port;
#                                 plaintext on loopback (--insecure-loopback everywhere)
#   cluster_tls [IP...]           instead: mutual TLS (a CA, a server certificate for 127.0.0.1,
#                                 the IPs and the name coordinator.ringmaster.test, a client
#                                 certificate, under $CP_WORK/tls) plus a
#                                 join and a submit token; the CLI gets them through the env
#   start_coordinator [FLAGS...]  (re)starts the coordinator on $CP_PORT with $CP_WORK/coord.db
#   start_agent NAME [FLAGS...]   starts agent NAME (work dir $CP_WORK/NAME); env via `env` before
#   job_field JOB FIELD           a field of `ringmaster status JOB` ("phase", "generation", ...)
#   wait_until SECONDS WHAT CMD...  polls CMD (every 0.1 s) until it succeeds; fails naming WHAT
#   cluster_stop                  kills everything started here (also on EXIT)
#   committed_step DIR            newest checkpoint step with a manifest under DIR/checkpoints, or 0
#   committed_at_least DIR N      succeeds when committed_step DIR >= N
#   ready_nodes N                 succeeds when at least N nodes are Ready
#   job_ended JOB                 succeeds when JOB is Succeeded, Failed or Cancelled
# PIDs: $COORD_PID, AGENT_PID[NAME]. Security flags: CP_COORD_SECURITY, CP_AGENT_SECURITY (arrays).
declare -A AGENT_PID

cluster_init() {
  CP_WORK=$1
  local b=${RINGMASTER_BINARY_DIR:?}
  CP_CLI=$b/cli/ringmaster
  CP_COORD=$b/coordinator/ringmaster-coordinator
  CP_AGENT=$b/agent/ringmaster-agent
  local bin
  for bin in "$CP_CLI" "$CP_COORD" "$CP_AGENT"; do
    [[ -x $bin ]] || { echo "SKIP: $bin not built"; exit 77; }
  done
  CP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  CP_MASTER_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  CP_ADDR=${CP_ADDR:-127.0.0.1}
  export RINGMASTER_COORDINATOR=$CP_ADDR:$CP_PORT
  CP_COORD_SECURITY=(--insecure-loopback)
  CP_AGENT_SECURITY=(--insecure-loopback)
  export RINGMASTER_INSECURE_LOOPBACK=1
}

# make_cert DIR NAME SUBJECT_CN EXT: a key and a certificate signed by DIR/ca.{crt,key}.
make_cert() {
  local d=$1 n=$2 cn=$3 ext=$4
  openssl req -newkey rsa:2048 -nodes -keyout "$d/$n.key" -subj "/CN=$cn" -out "$d/$n.csr" 2>/dev/null
  printf '%s\n' "$ext" >"$d/$n.ext"
  openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -sha256 -extfile "$d/$n.ext" -out "$d/$n.crt" 2>/dev/null
  chmod 600 "$d/$n.key"
}

# make_ca DIR [CN]: a self-signed CA, DIR/ca.{crt,key}.
make_ca() {
  mkdir -p "$1"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=${2:-ringmaster test CA}" \
    -keyout "$1/ca.key" -out "$1/ca.crt" 2>/dev/null
}

cluster_tls() {
  command -v openssl >/dev/null || { echo "SKIP: needs openssl"; exit 77; }
  local d=$CP_WORK/tls ip san="IP:127.0.0.1,DNS:coordinator.ringmaster.test"
  for ip in "$@"; do san+=",IP:$ip"; done
  make_ca "$d"
  make_cert "$d" server ringmaster-coordinator "subjectAltName=$san
extendedKeyUsage=serverAuth"
  make_cert "$d" client ringmaster-client "extendedKeyUsage=clientAuth"
  (umask 077; openssl rand -hex 24 >"$d/join.token"; openssl rand -hex 24 >"$d/submit.token")
  CP_COORD_SECURITY=(--tls-cert "$d/server.crt" --tls-key "$d/server.key" --tls-client-ca "$d/ca.crt"
    --join-token-file "$d/join.token" --submit-token-file "$d/submit.token")
  CP_AGENT_SECURITY=(--tls-ca "$d/ca.crt" --tls-cert "$d/client.crt" --tls-key "$d/client.key"
    --join-token-file "$d/join.token")
  unset RINGMASTER_INSECURE_LOOPBACK
  export RINGMASTER_TLS_CA=$d/ca.crt RINGMASTER_TLS_CERT=$d/client.crt RINGMASTER_TLS_KEY=$d/client.key
  export RINGMASTER_TOKEN_FILE=$d/submit.token
}

start_coordinator() {
  "$CP_COORD" --listen "$CP_ADDR:$CP_PORT" --db "$CP_WORK/coord.db" --master-port "$CP_MASTER_PORT" \
    "${CP_COORD_SECURITY[@]}" "$@" >>"$CP_WORK/coordinator.log" 2>&1 &
  COORD_PID=$!
  wait_until 30 "the coordinator to answer" "$CP_CLI" nodes
}

start_agent() {
  local name=$1
  shift
  "$CP_AGENT" --coordinator "$CP_ADDR:$CP_PORT" --trainer "${TRAINER:?}" --work-dir "$CP_WORK/$name" \
    --name "$name" --inventory-override none "${CP_AGENT_SECURITY[@]}" "$@" >>"$CP_WORK/$name.log" 2>&1 &
  AGENT_PID[$name]=$!
}

job_field() {
  "$CP_CLI" status "$1" 2>/dev/null | sed -n "s/^$2: *//p"
}

wait_until() {
  local secs=$1 what=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "FAIL: no $what within ${secs}s"
      return 1
    fi
    sleep 0.1
  done
}

cluster_stop() {
  local p
  for p in "${AGENT_PID[@]}" ${COORD_PID:-}; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${AGENT_PID[@]}" ${COORD_PID:-}; do
    timeout 30 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
  done
  # Trainers that outlived a killed agent.
  pkill -KILL -f "$CP_WORK/.*/job.yaml" 2>/dev/null || true
}

# Tail of every log under the cluster's work dir (on failure).
cluster_logs() {
  local f
  for f in "$CP_WORK"/*.log "$CP_WORK"/*/jobs/*/gen-*/rank-*.log; do
    [[ -f $f ]] || continue
    echo "--- $f"
    tail -n 15 "$f"
  done
}

committed_step() {
  local m s=0
  for m in "$1"/checkpoints/step-*/manifest.json; do
    [[ -f $m ]] || continue
    m=${m%/manifest.json}
    s=$((10#${m##*step-}))
  done
  echo "$s"
}

ready_nodes() {
  (($("$CP_CLI" nodes | grep -c Ready) >= $1))
}

job_ended() {
  [[ $(job_field "$1" phase) =~ Succeeded|Failed|Cancelled ]]
}

committed_at_least() {
  (($(committed_step "$1") >= $2))
}
