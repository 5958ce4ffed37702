#!/usr/bin/env bash
# ctest-labels: deploy
# k8s/: yamllint passes and every manifest validates offline against the Kubernetes API schemas
# (1.25 and 1.37, strict) and the Prometheus Operator's ServiceMonitor schema, with the
# cross-object checks of scripts/validate-manifests.py. Metrics: the coordinator and the agents
# pass --metrics-listen on their "metrics" container ports (9400, 9401), the ServiceMonitor
# scrapes those through Services whose jobLabel makes the scrape jobs "ringmaster-coordinator"
# (the alert rules' up{job=...}) and "ringmaster-agent", no trainer serves a port of its own, and
# the NetworkPolicy admits Prometheus to the coordinator's metrics port. A copy with a misspelt
# field, a wrong type, a ServiceMonitor typo and a dangling port name must be rejected.
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
PY=$ROOT/.venv/bin/python
command -v yamllint >/dev/null || { echo "no yamllint (scripts/setup.sh installs it)"; exit 77; }
"$PY" -c "import kubernetes_validate" 2>/dev/null || { echo "no kubernetes-validate in .venv (scripts/setup.sh)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT"

yamllint -s -d '{extends: default, rules: {line-length: {max: 120}}}' k8s/
"$PY" scripts/validate-manifests.py k8s/*.yaml >"$work/ok.txt" || { cat "$work/ok.txt"; exit 1; }
tail -1 "$work/ok.txt"
for kind in Namespace StatefulSet DaemonSet Service NetworkPolicy Secret ServiceMonitor PodDisruptionBudget ConfigMap Role PersistentVolumeClaim; do
  grep -q "^ok .* $kind/" "$work/ok.txt" || { echo "FAIL: k8s/ has no valid $kind"; exit 1; }
done

# Metrics wiring (issue #6).
"$PY" - k8s/*.yaml <<'PY'
import sys, yaml
docs = [d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]
def one(kind, name):
    (d,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return d
def container(kind, name):
    return one(kind, name)["spec"]["template"]["spec"]["containers"][0]
def fail(msg):
    sys.exit(f"FAIL: {msg}")
c = container("StatefulSet", "ringmaster-coordinator")
i = c["args"].index("--metrics-listen") if "--metrics-listen" in c["args"] else fail("coordinator: no --metrics-listen")
if c["args"][i + 1] != "0.0.0.0:9400":
    fail(f"coordinator --metrics-listen {c['args'][i + 1]}")
if {"name": "metrics", "containerPort": 9400, "protocol": "TCP"} not in c["ports"]:
    fail("coordinator: no container port metrics 9400")
a = container("DaemonSet", "ringmaster-agent")
if "--metrics-listen=0.0.0.0:9401" not in a["args"]:
    fail(f"agent: no --metrics-listen=0.0.0.0:9401 in {a['args']}")
if a["ports"] != [{"name": "metrics", "containerPort": 9401, "protocol": "TCP"}]:
    fail(f"agent ports {a['ports']}: want only metrics 9401 (no trainer ports)")
env = one("ConfigMap", "ringmaster-agent-trainer-env")["data"]["trainer.env"]
if any(l.startswith("RINGMASTER_METRICS_PORT=") for l in env.splitlines()):
    fail("trainer.env sets RINGMASTER_METRICS_PORT: the agent's page already has every rank")
sm = one("ServiceMonitor", "ringmaster")["spec"]
if [e["port"] for e in sm["endpoints"]] != ["metrics"]:
    fail(f"ServiceMonitor endpoints {sm['endpoints']}")
jobs = {}
for s in docs:
    labels = s["metadata"].get("labels") or {}
    if s["kind"] == "Service" and all(labels.get(k) == v for k, v in sm["selector"]["matchLabels"].items()):
        port = [p for p in s["spec"]["ports"] if p["name"] == "metrics"]
        jobs[labels.get(sm.get("jobLabel", ""), s["metadata"]["name"])] = (port[0]["port"], port[0]["targetPort"])
if jobs != {"ringmaster-coordinator": (9400, "metrics"), "ringmaster-agent": (9401, "metrics")}:
    fail(f"ServiceMonitor scrape jobs (name: port, targetPort) {jobs}")
np = one("NetworkPolicy", "ringmaster-coordinator")["spec"]
if not any({"port": "metrics", "protocol": "TCP"} in r.get("ports", []) and
           any((f.get("namespaceSelector") or {}).get("matchLabels") == {"kubernetes.io/metadata.name": "monitoring"}
               for f in r["from"]) for r in np["ingress"]):
    fail("NetworkPolicy: monitoring cannot reach the coordinator's metrics port")
agent_labels = one("DaemonSet", "ringmaster-agent")["spec"]["template"]["metadata"]["labels"]
for d in docs:
    if d["kind"] == "NetworkPolicy" and all(agent_labels.get(k) == v for k, v in d["spec"]["podSelector"]["matchLabels"].items()):
        fail(f"NetworkPolicy {d['metadata']['name']} selects the agents: check it admits Prometheus to port 9401")
print("metrics: coordinator :9400 and agent :9401 served, scrape jobs ringmaster-coordinator and ringmaster-agent")
PY

# The checks must be able to fail.
mkdir "$work/bad"
cp k8s/*.yaml "$work/bad/"
sed -i 's/terminationGracePeriodSeconds: 60/terminationGracePeriodSecond: 60/' "$work/bad/agent-daemonset.yaml"
sed -i 's/^  replicas: 1$/  replicas: "one"/' "$work/bad/coordinator-statefulset.yaml"
sed -i 's/      interval: 30s/      intervall: 30s/' "$work/bad/servicemonitor.yaml"
sed -i '0,/targetPort: metrics/s//targetPort: metrics-7/' "$work/bad/services.yaml"
if "$PY" scripts/validate-manifests.py "$work"/bad/*.yaml >"$work/bad.txt"; then
  echo "FAIL: broken manifests were accepted"; exit 1
fi
for needle in "'terminationGracePeriodSecond' was unexpected" "'one' is not of type 'integer'" \
  "'intervall' was unexpected" "targetPort metrics-7 is not a container port"; do
  grep -qF "$needle" "$work/bad.txt" || { echo "FAIL: not reported: $needle"; cat "$work/bad.txt"; exit 1; }
done
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n' >"$work/bad-type.yaml"
if "$PY" scripts/validate-manifests.py "$work/bad-type.yaml" >/dev/null; then echo "FAIL: ConfigMap data 1 accepted"; exit 1; fi
printf 'key: [unclosed\n' >"$work/bad.yaml"
if yamllint -d default "$work/bad.yaml" >/dev/null; then echo "FAIL: yamllint accepted broken YAML"; exit 1; fi
echo "deploy_k8s_manifests: 1 passed, 0 failed"
