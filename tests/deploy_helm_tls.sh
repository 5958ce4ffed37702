#!/usr/bin/env bash
# ctest-labels: deploy
# helm/ringmaster installs cleanly by default (issue #22): rendered by real Helm
# (scripts/render-chart.py) with only the value the documented install sets, the coordinator's
# --tls-cert/--tls-key/--tls-client-ca and token flags name files that its Secret holds, non-empty;
# `openssl verify` accepts the server certificate for TLS servers and the CLI's client certificate
# (the client Secret) for TLS clients against the generated CA; the server certificate names the
# coordinator's Service (the agents' --coordinator host) and 127.0.0.1; keys match certificates.
# A second install gets another CA, which must not verify the first one's certificates. Then the
# real binaries: the coordinator started with the rendered flags and files (paths moved under a
# temporary folder, listening on loopback), an agent with the rendered agent flags registers, and
# the CLI command NOTES.txt prints lists it; without the client certificate the CLI is refused.
# Given tokens are used as given; partial PEM values and tls.existingSecret behave as documented.
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${RINGMASTER_BINARY_DIR:-$ROOT/build}
PY=$ROOT/.venv/bin/python
CHART=$ROOT/helm/ringmaster
command -v openssl >/dev/null || { echo "no openssl (scripts/setup.sh)"; exit 77; }
"$PY" -c "import helm_python, yaml" 2>/dev/null || { echo "no helm-python-sdk in .venv (scripts/setup.sh)"; exit 77; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$ROOT"
render() { "$PY" scripts/render-chart.py --strict --release rm --namespace ringmaster "$@" "$CHART"; }

# 1. Render as the documented install does, twice (two installs), and unpack the Secrets into
#    $work/<install>/<mount path>: the files each container would see.
for i in 1 2; do
  render --set agent.sharedStorage.existingClaim=shared >"$work/r$i.yaml"
  render --notes --set agent.sharedStorage.existingClaim=shared >"$work/r$i.notes"
  "$PY" - "$work/r$i.yaml" "$work/i$i" >"$work/i$i.args" <<'PY'
import base64, json, os, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = sys.argv[2]
def fail(msg):
    sys.exit(f"FAIL: {msg}")
secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
def workload(kind):
    (d,) = [d for d in docs if d["kind"] == kind]
    return d["spec"]["template"]["spec"]
args = {}
for kind in ("StatefulSet", "DaemonSet"):
    spec = workload(kind)
    c = spec["containers"][0]
    vols = {v["name"]: v for v in spec["volumes"]}
    for m in c["volumeMounts"]:
        secret = vols.get(m["name"], {}).get("secret")  # "state" is a volumeClaimTemplate
        if not secret:
            continue
        s = secrets.get(secret["secretName"]) or fail(f"{kind} mounts Secret {secret['secretName']}, not rendered")
        for key, b64 in s["data"].items():
            path = out + m["mountPath"] + "/" + key
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(b64))
            os.chmod(path, 0o600)  # the tokens' reader warns about group-readable files
    args[kind] = c["args"]
# Every file a flag names exists in a mounted Secret and is not empty.
cargs = args["StatefulSet"]
for flag in ("--tls-cert", "--tls-key", "--tls-client-ca", "--join-token-file", "--submit-token-file"):
    if flag not in cargs:
        fail(f"coordinator: no {flag}")
    path = out + cargs[cargs.index(flag) + 1]
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        fail(f"coordinator {flag} {cargs[cargs.index(flag) + 1]}: no such file in its Secrets, or empty")
for a in args["DaemonSet"]:
    if a.startswith(("--tls-", "--join-token-file")):
        path = out + a.split("=", 1)[1]
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            fail(f"agent {a}: no such file in its Secrets, or empty")
json.dump(args, sys.stdout)
PY
done
c1=$work/i1/etc/ringmaster/credentials
cl1=$work/i1/etc/ringmaster/client
cl2=$work/i2/etc/ringmaster/client
svc=rm-ringmaster-coordinator.ringmaster.svc
grep -q -- "--coordinator=$svc:7070" "$work/i1.args" || { echo "FAIL: agents do not dial $svc:7070"; exit 1; }

# 2. The chain, the purposes, the names, the keys.
openssl verify -CAfile "$c1/ca.crt" -purpose sslserver "$c1/tls.crt"
openssl verify -CAfile "$cl1/ca.crt" -purpose sslclient "$cl1/tls.crt"
cmp "$c1/ca.crt" "$cl1/ca.crt"
cmp "$c1/submit-token" "$cl1/submit-token"
openssl x509 -in "$cl1/tls.crt" -noout -ext extendedKeyUsage | grep -q "TLS Web Client Authentication"
openssl x509 -in "$c1/tls.crt" -noout -ext subjectAltName >"$work/san.txt"
for name in "DNS:$svc" "DNS:$svc.cluster.local" "DNS:rm-ringmaster-coordinator" "IP Address:127.0.0.1"; do
  grep -q "$name\(,\|$\)" "$work/san.txt" || { cat "$work/san.txt"; echo "FAIL: server certificate lacks $name"; exit 1; }
done
for d in "$c1" "$cl1"; do
  [[ $(openssl x509 -in "$d/tls.crt" -noout -pubkey) == $(openssl pkey -in "$d/tls.key" -pubout) ]] ||
    { echo "FAIL: $d/tls.key is not the key of $d/tls.crt"; exit 1; }
done
[[ $(wc -c <"$c1/join-token") -ge 32 && $(wc -c <"$c1/submit-token") -ge 32 ]] || { echo "FAIL: short tokens"; exit 1; }
cmp -s "$c1/join-token" "$c1/submit-token" && { echo "FAIL: join and submit tokens are equal"; exit 1; }
# Another install, another CA: the check above must be able to fail.
if openssl verify -CAfile "$cl2/ca.crt" "$c1/tls.crt" >/dev/null 2>&1; then
  echo "FAIL: install 2's CA verifies install 1's server certificate"; exit 1
fi
cmp -s "$c1/join-token" "$work/i2/etc/ringmaster/credentials/join-token" && { echo "FAIL: same join token twice"; exit 1; }
echo "certificates: chain, serverAuth/clientAuth, SANs, keys: ok"

# 3. Values: tokens given are used verbatim; PEM values only all three; tls.existingSecret: no Secret.
render --set joinToken=j0in-t0ken,submitToken=s-ub-mit >"$work/tok.yaml"
"$PY" - "$work/tok.yaml" <<'PY'
import base64, sys, yaml
(s,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Secret" and d["metadata"]["name"].endswith("-credentials")]
got = {k: base64.b64decode(s["data"][k]).decode() for k in ("join-token", "submit-token")}
if got != {"join-token": "j0in-t0ken", "submit-token": "s-ub-mit"}:
    sys.exit(f"FAIL: given tokens not used: {got}")
PY
if render --set tls.cert=x >/dev/null 2>"$work/pem.txt"; then echo "FAIL: tls.cert alone rendered"; exit 1; fi
grep -q "tls.cert, tls.key and tls.ca go together" "$work/pem.txt" || { cat "$work/pem.txt"; exit 1; }
render --set tls.existingSecret=mine >"$work/own.yaml"
if grep -q "^kind: Secret" "$work/own.yaml"; then echo "FAIL: a Secret rendered with tls.existingSecret"; exit 1; fi
grep -q "secretName: mine" "$work/own.yaml"

# 4. The real binaries with the rendered flags and files.
for b in coordinator/ringmaster-coordinator agent/ringmaster-agent cli/ringmaster; do
  [[ -x $BIN/$b ]] || { echo "no $BIN/$b: build it to run the last part"; exit 77; }
done
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The StatefulSet's args, with /etc and /var/lib moved under install 1's folder and the listen
# addresses on loopback; the agent's likewise, dialling that port with the Service's name as the
# TLS name (no cluster DNS here).
"$PY" - "$work/i1.args" "$work/i1" "$port" "$svc" >"$work/cmds" <<'PY'
import json, shlex, sys
args, root, port, svc = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
def move(a):
    return a.replace("/etc/ringmaster/", root + "/etc/ringmaster/").replace("/var/lib/ringmaster", root + "/var/lib/ringmaster")
c = [move(a) for a in args["StatefulSet"]]
c[c.index("--listen") + 1] = f"127.0.0.1:{port}"
c[c.index("--metrics-listen") + 1] = "127.0.0.1:0"
a = []
for x in args["DaemonSet"]:
    k = x.split("=", 1)[0]
    x = {"--coordinator": f"--coordinator=127.0.0.1:{port}", "--name": "--name=node-a", "--address": "--address=127.0.0.1",
         "--metrics-listen": "--metrics-listen=127.0.0.1:0", "--trainer": "--trainer=/bin/false"}.get(k, x)
    a.append(move(x))
a.append(f"--tls-server-name={svc}")
print(shlex.join(c))
print(shlex.join(a))
PY
mkdir -p "$work/i1/var/lib/ringmaster/agent"
# shellcheck disable=SC2046
eval "\"$BIN/coordinator/ringmaster-coordinator\" $(sed -n 1p "$work/cmds")" >"$work/coordinator.log" 2>&1 &
pids+=($!)
eval "\"$BIN/agent/ringmaster-agent\" $(sed -n 2p "$work/cmds")" >"$work/agent.log" 2>&1 &
pids+=($!)
# The command NOTES.txt prints after "exec statefulset/... --", with the client Secret's mount
# moved and the port changed.
notes_cmd=$(grep -o "exec statefulset/rm-ringmaster-coordinator -- ringmaster .* nodes$" "$work/r1.notes" | sed 's/.* -- ringmaster //')
[[ -n $notes_cmd ]] || { cat "$work/r1.notes"; echo "FAIL: no exec command in NOTES"; exit 1; }
notes_cmd=${notes_cmd//\/etc\/ringmaster\//$work/i1/etc/ringmaster/}
notes_cmd=${notes_cmd//127.0.0.1:7070/127.0.0.1:$port}
# Poll until the agent shows up (the coordinator and the agent start in the background).
for _ in $(seq 1 300); do  # up to a minute on a loaded machine
  # shellcheck disable=SC2086
  if "$BIN/cli/ringmaster" $notes_cmd >"$work/nodes.txt" 2>"$work/nodes.err" && grep -q "^node-a " "$work/nodes.txt"; then
    break
  fi
  sleep 0.2
done
grep -q "^node-a " "$work/nodes.txt" || {
  cat "$work/nodes.txt" "$work/nodes.err" "$work/coordinator.log" "$work/agent.log"
  echo "FAIL: the NOTES command does not list the agent"; exit 1
}
cat "$work/nodes.txt"
grep -q "mutual TLS, join token required, submit token required" "$work/coordinator.log"
# Without the client certificate the coordinator refuses the connection.
no_cert=$(sed 's/--tls-cert [^ ]* --tls-key [^ ]* //' <<<"$notes_cmd")
[[ $no_cert != "$notes_cmd" ]] || { echo "FAIL: could not drop the client certificate from: $notes_cmd"; exit 1; }
# shellcheck disable=SC2086
if "$BIN/cli/ringmaster" $no_cert >/dev/null 2>&1; then echo "FAIL: the CLI got in without a client certificate"; exit 1; fi
echo "deploy_helm_tls: 1 passed, 0 failed"
