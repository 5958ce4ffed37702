#!/usr/bin/env bash
# ctest-labels: security;integration
# Issue #31, item 3 (mutual TLS): with --bind-node-names-to-certs an agent registers only under a
# node name its client certificate carries (subject CN or subjectAltName), or one --node-cert-map
# allows for a name the certificate carries. Certificates from one CA, all with the join token:
#   - node-a's agent with node-a's certificate (CN and DNS SAN node-a) is Ready;
#   - an agent calling itself node-b with node-a's certificate is refused with PERMISSION_DENIED
#     naming the node name and the certificate's names, and logged as a refused Register;
#   - node-c's agent with a certificate for "rack1-agents" is Ready through the map's line
#     "node-c rack1-agents"; the same certificate cannot register node-d (not in the map);
#   - the flag without --tls-client-ca stops the coordinator at start (exit 2).
# Before: a client certificate was not bound to a node name; any certificate from the CA (and
# the join token) registered any name (node-b and node-d were Ready), and the flags did not
# exist.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/security/lib/security.sh
source "$here/lib/security.sh"
work=$(mktemp -d)
security_cluster "$work"
cluster_tls
d=$work/tls
make_cert "$d" node-a node-a "subjectAltName=DNS:node-a
extendedKeyUsage=clientAuth"
make_cert "$d" rack rack1-agents "extendedKeyUsage=clientAuth"
printf '# node name, certificate name\nnode-c rack1-agents\n' >"$work/node-certs.txt"

rc=0
"$CP_COORD" --listen "127.0.0.1:$CP_PORT" --db "$work/x.db" --insecure-loopback \
  --bind-node-names-to-certs >"$work/nomtls.out" 2>&1 || rc=$?
((rc == 2)) && grep -q "need mutual TLS (--tls-client-ca)" "$work/nomtls.out" ||
  fail "--bind-node-names-to-certs without mutual TLS: exit $rc, $(cat "$work/nomtls.out")"

start_coordinator --bind-node-names-to-certs --node-cert-map "$work/node-certs.txt"
grep -q "node names bound to client certificates" "$work/coordinator.log" ||
  fail "the coordinator does not say that node names are bound"
agent_with() {  # agent_with NAME CERT
  CP_AGENT_SECURITY=(--tls-ca "$d/ca.crt" --tls-cert "$d/$2.crt" --tls-key "$d/$2.key"
    --join-token-file "$d/join.token")
  start_agent "$1"
}
agent_with node-a node-a
agent_with node-b node-a
agent_with node-c rack
agent_with node-d rack
wait_until 60 "node-a and node-c to be Ready" ready_nodes 2 || fail "node-a and node-c not Ready"
refused() {
  grep -q "node name '$1' is not named by the client certificate (CN and subjectAltNames $2)" \
    "$work/$1.log"
}
wait_until 60 "node-b's refusal" refused node-b "'node-a'" ||
  fail "node-b with node-a's certificate was not refused naming both: $(tail -n 3 "$work/node-b.log")"
wait_until 60 "node-d's refusal" refused node-d "'rack1-agents'" ||
  fail "node-d with the rack certificate was not refused: $(tail -n 3 "$work/node-d.log")"
nodes=$("$CP_CLI" nodes)
echo "$nodes"
grep -q "node-a .*Ready" <<<"$nodes" && grep -q "node-c .*Ready" <<<"$nodes" ||
  fail "node-a or node-c is not Ready"
grep -q "node-b\|node-d" <<<"$nodes" && fail "a refused node was registered"
grep -q "refused AgentService/Register from .*node name 'node-b'" "$work/coordinator.log" ||
  fail "the refusal is not logged by the coordinator"
echo "node_cert_binding: 1 passed, 0 failed"
