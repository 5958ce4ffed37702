#!/usr/bin/env bash
# ctest-labels: integration;serial;faults
# The control plane over mutual TLS with a join token and a submit token (issue #8,
# docs/operations.md "Security"). A CA, a server certificate (SAN IP:127.0.0.1 and DNS:
# coordinator.ringmaster.test) and a client certificate are made with openssl. Refused, each with
# a clear message: a plaintext coordinator on a non-loopback address, one with neither TLS nor
# --insecure-loopback, an agent with a wrong join token (logged on the coordinator with the
# agent's address; the node never Ready), an agent without a client certificate, an agent
# trusting another CA, a CLI submit without or with a wrong token, plaintext to the TLS
# coordinator, a CLI reaching it as "localhost" (a name its certificate lacks) unless
# --tls-server-name names one it has (an agent so too). Then a job submitted with the right
# token over TLS runs to Succeeded. No token value appears in any log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
T=${TRAINER:?}
# shellcheck source=lib/cluster.sh
source "$here/lib/cluster.sh"
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
cluster_init "$work"
cluster_tls
tls=$work/tls
fail() { echo "FAIL: $*"; cluster_logs; exit 1; }

# ---- the coordinator refuses to start unsafely
if "$CP_COORD" --listen 0.0.0.0:0 --db "$work/x.db" --insecure-loopback 2>"$work/plain.err"; then
  fail "a plaintext coordinator on 0.0.0.0 started"
fi
grep -q "only on loopback" "$work/plain.err" || fail "no loopback message: $(cat "$work/plain.err")"
if "$CP_COORD" --listen 127.0.0.1:0 --db "$work/x.db" 2>"$work/none.err"; then
  fail "a coordinator without TLS or --insecure-loopback started"
fi
grep -q -- "--tls-cert" "$work/none.err" || fail "no TLS hint: $(cat "$work/none.err")"
if "$CP_COORD" --listen 127.0.0.1:0 --db "$work/x.db" --tls-cert "$tls/missing.crt" \
  --tls-key "$tls/server.key" 2>"$work/missing.err"; then
  fail "a coordinator with a missing certificate started"
fi
grep -q "$tls/missing.crt" "$work/missing.err" || fail "the error does not name the file"
echo "refused at start: plaintext off loopback, no TLS, a missing certificate"

# ---- mutual TLS, both tokens; one good agent
start_coordinator --last-call 1s
grep -q "mutual TLS, join token required, submit token required" "$work/coordinator.log" ||
  fail "the coordinator does not say it runs mutual TLS with both tokens"
start_agent good --address 127.0.0.1 --throughput off
ready() { "$CP_CLI" nodes | grep -q "^$1 .*Ready"; }
wait_until 30 "agent good Ready" ready good || fail "the good agent did not register"
echo "agent good: Ready over mutual TLS"

# ---- a coordinator reached by a name its certificate does not carry: refused, unless
# --tls-server-name says which name to verify (the certificate lists coordinator.ringmaster.test)
if "$CP_CLI" --coordinator "localhost:$CP_PORT" nodes >"$work/name.out" 2>"$work/name.err"; then
  fail "the CLI accepted a certificate without the name localhost"
fi
RINGMASTER_TLS_SERVER_NAME=coordinator.ringmaster.test "$CP_CLI" --coordinator "localhost:$CP_PORT" \
  nodes | grep -q "^good " || fail "the CLI with --tls-server-name did not reach the coordinator"
"$CP_CLI" --coordinator "localhost:$CP_PORT" --tls-server-name wrong.ringmaster.test nodes \
  >/dev/null 2>&1 && fail "the CLI accepted a certificate without the name it was told"
"$CP_AGENT" --coordinator "localhost:$CP_PORT" --trainer "$T" --work-dir "$work/named" --name named \
  --inventory-override none --throughput off --tls-server-name coordinator.ringmaster.test \
  "${CP_AGENT_SECURITY[@]}" >>"$work/named.log" 2>&1 &
AGENT_PID[named]=$!
wait_until 30 "agent named Ready" ready named || fail "the agent with --tls-server-name did not register"
echo "server name: localhost refused; --tls-server-name coordinator.ringmaster.test accepted (CLI, agent)"

# ---- refused agents: a wrong join token, no client certificate, another CA
echo "not-the-join-token" >"$work/wrong.token"
chmod 600 "$work/wrong.token"
make_ca "$work/other" "another CA"
bad_agent() {  # NAME FLAGS...: an agent with its own security flags
  local name=$1
  shift
  "$CP_AGENT" --coordinator "$CP_ADDR:$CP_PORT" --trainer "$T" --work-dir "$work/$name" \
    --name "$name" --inventory-override none --throughput off "$@" >>"$work/$name.log" 2>&1 &
  AGENT_PID[$name]=$!
}
bad_agent wrongtoken --tls-ca "$tls/ca.crt" --tls-cert "$tls/client.crt" --tls-key "$tls/client.key" \
  --join-token-file "$work/wrong.token"
bad_agent nocert --tls-ca "$tls/ca.crt" --join-token-file "$tls/join.token"
bad_agent otherca --tls-ca "$work/other/ca.crt" --tls-cert "$tls/client.crt" \
  --tls-key "$tls/client.key" --join-token-file "$tls/join.token"
refused_logged() {
  grep -q "refused AgentService/Register from ipv[46]:.*127.0.0.1.*join token; the token sent is wrong" \
    "$work/coordinator.log"
}
wait_until 30 "the wrong join token refused and logged" refused_logged || fail "no refusal logged"
for a in wrongtoken nocert otherca; do
  wait_until 30 "agent $a to report it cannot reach the coordinator" \
    grep -q "cannot reach the coordinator" "$work/$a.log" || fail "agent $a did not report"
done
grep -q "join token; the token sent is wrong" "$work/wrongtoken.log" || fail "wrongtoken: no reason"
sleep 2  # a few more retries
for a in wrongtoken nocert otherca; do
  "$CP_CLI" nodes | grep -q "^$a " && fail "agent $a was admitted"
  kill -0 "${AGENT_PID[$a]}" || fail "agent $a exited instead of retrying"
done
echo "refused agents: wrong join token (logged with its address), no client certificate, other CA"

# ---- the CLI: no token, a wrong token, the join token, plaintext
cat >"$work/job.yaml" <<YAML
name: control-plane-tls
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64,
           max_position_embeddings: 64, hidden_dropout_prob: 0.0, attention_probs_dropout_prob: 0.0}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv, max_seq_len: 32, shuffle: true}
train: {epochs: 1, max_steps: 4, global_batch_size: 8, micro_batch_size: 4, lr: 2.0e-3,
        warmup_steps: 1, seed: 5, max_grad_norm: 0.5}
output: {dir: out, checkpoint_every_steps: 0}
distributed: {sharding: full_shard, nodes: 1, procs_per_node: 1}
YAML
"$T" gen-data --out "$work/data" --train 40 --dev 8 --seed 5 >/dev/null
submit_refused() {  # WHAT PATTERN ENV...: a submit that must fail saying PATTERN
  local what=$1 pattern=$2
  shift 2
  if env "$@" "$CP_CLI" submit "$work/job.yaml" >"$work/submit.out" 2>"$work/submit.err"; then
    fail "submit $what succeeded"
  fi
  grep -q -- "$pattern" "$work/submit.err" || fail "submit $what: $(cat "$work/submit.err")"
}
submit_refused "without a token" "submit token; none was sent" -u RINGMASTER_TOKEN_FILE
submit_refused "with a wrong token" "submit token; the token sent is wrong" -u RINGMASTER_TOKEN_FILE \
  RINGMASTER_TOKEN=wrong-token
submit_refused "with the join token" "submit token; the token sent is wrong" \
  RINGMASTER_TOKEN_FILE="$tls/join.token"
submit_refused "in plaintext to a remote address" "only on loopback" -u RINGMASTER_TLS_CA \
  -u RINGMASTER_TLS_CERT -u RINGMASTER_TLS_KEY RINGMASTER_INSECURE_LOOPBACK=1 \
  RINGMASTER_COORDINATOR=10.9.9.9:7070
submit_refused "in plaintext to the TLS coordinator" "" -u RINGMASTER_TLS_CA -u RINGMASTER_TLS_CERT \
  -u RINGMASTER_TLS_KEY RINGMASTER_INSECURE_LOOPBACK=1
"$CP_CLI" list >/dev/null || fail "a read with the submit token was refused"
env -u RINGMASTER_TOKEN_FILE "$CP_CLI" list >/dev/null 2>&1 && fail "a read without a token succeeded"
echo "CLI refused: no token, a wrong token, the join token, plaintext"

# ---- the right token over TLS: the job runs to the end
id=$("$CP_CLI" submit "$work/job.yaml") || fail "submit with the right token failed"
done_() { [[ $(job_field "$id" phase) =~ Succeeded|Failed|Cancelled ]]; }
wait_until 300 "job $id to end" done_ || fail "the job did not end"
[[ $(job_field "$id" phase) == Succeeded ]] || { "$CP_CLI" status "$id"; fail "job $id did not succeed"; }
echo "job $id: Succeeded over mutual TLS"

# ---- no token value in any log
cluster_stop
logs=(--include='*.log' --include='*.err' --include='*.out')
for tok in "$tls/join.token" "$tls/submit.token"; do
  if grep -rqF "${logs[@]}" -e "$(cat "$tok")" "$work"; then
    fail "a token value appears in a log: $(grep -rlF "${logs[@]}" -e "$(cat "$tok")" "$work")"
  fi
done
n=$(find "$work" -name '*.log' | wc -l)
((n >= 6)) || fail "only $n logs to search"
echo "control_plane_tls: 1 passed, 0 failed"
