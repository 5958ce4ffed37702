#!/usr/bin/env bash
# ctest-labels: deploy
# helm/ringmaster with real Helm: scripts/render-chart.py runs Helm v4's engine (helm-python-sdk
# in .venv): `helm lint --strict` and rendering with missingkey=error, for the default values,
# ci/p40-values.yaml, an everything-on file (TLS from an existing Secret), metrics scraping off,
# and mixed agent pools (default CUDA 13, P40 on CUDA 12, a GPU-less CPU pool). values.yaml
# validates against values.schema.json (and a values file with a typo, a wrong enum and a wrong
# type is rejected, both by jsonschema and by Helm); the rendered objects validate like k8s/ and
# carry the standard labels, the flags they pass are flags the real binaries accept, and NOTES.txt
# renders. Metrics: the coordinator and the agents pass --metrics-listen on their "metrics" ports
# (metrics.coordinatorPort / metrics.agentPort), the ServiceMonitor's jobLabel makes the scrape
# jobs "ringmaster-coordinator" and "ringmaster-agent" whatever the release is called, and no
# trainer serves a metrics port of its own. Pools: one DaemonSet each, selecting only its own pods,
# node selectors that cannot both match a node, the CPU pool without GPUs on the CPU image.
# The generated TLS material is checked by tests/deploy_helm_tls.sh.
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${RINGMASTER_BINARY_DIR:-$ROOT/build}
PY=$ROOT/.venv/bin/python
CHART=$ROOT/helm/ringmaster
command -v yamllint >/dev/null || { echo "no yamllint (scripts/setup.sh)"; exit 77; }
"$PY" -c "import kubernetes_validate, helm_python" 2>/dev/null ||
  { echo "no kubernetes-validate or helm-python-sdk in .venv (scripts/setup.sh)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT"
render() { "$PY" scripts/render-chart.py --strict --release rm --namespace ringmaster "$@" "$CHART"; }
cat >"$work/mixed-values.yaml" <<'YAML'
agent:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
agentPools:
  - {name: p40, flavor: cuda12, gpusPerNode: 4, nodeSelector: {nvidia.com/gpu.product: Tesla-P40}}
  - name: cpu
    flavor: cpu
    gpusPerNode: 0
    nodeSelector: {nvidia.com/gpu.product: none}
    tolerations: []
    resources: {requests: {cpu: "16", memory: 32Gi}, limits: {memory: 64Gi}}
images: {cpuAgent: {repository: registry.invalid/ringmaster-agent-cpu, tag: "7"}}
YAML

yamllint -s -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable}}' \
  "$CHART/Chart.yaml" "$CHART/values.yaml" "$CHART"/ci/*.yaml
grep -qx 'apiVersion: v2' "$CHART/Chart.yaml"
for f in _helpers.tpl NOTES.txt; do [[ -f $CHART/templates/$f ]] || { echo "FAIL: no templates/$f"; exit 1; }; done

# 1. values.yaml against the schema with an independent validator (Python jsonschema, draft 7).
cat >"$work/typo.yaml" <<'YAML'
agent:
  gpusPerNod: 2
compression: zstd
metrics: {agentPort: "9401"}
YAML
"$PY" - "$CHART" "$work/typo.yaml" "$work/mixed-values.yaml" <<'PY'
import json, sys, jsonschema, yaml
chart, typo = sys.argv[1], sys.argv[2]
schema = json.load(open(f"{chart}/values.schema.json"))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema)
def objects(s, path="$"):
    if isinstance(s, dict):
        if s.get("type") == "object" and "properties" in s and s.get("additionalProperties") is not False:
            sys.exit(f"FAIL: {path} allows unknown keys")
        for k, x in s.items():
            objects(x, f"{path}.{k}")
    elif isinstance(s, list):
        for i, x in enumerate(s):
            objects(x, f"{path}[{i}]")
objects(schema)
for f in [f"{chart}/values.yaml", f"{chart}/ci/p40-values.yaml", sys.argv[3]]:
    errs = list(v.iter_errors(yaml.safe_load(open(f))))
    if not f.endswith("/values.yaml"):  # an overlay: check it merged over the defaults
        base = yaml.safe_load(open(f"{chart}/values.yaml"))
        def merge(a, b):
            for k, x in b.items():
                a[k] = merge(a.get(k, {}), x) if isinstance(x, dict) and isinstance(a.get(k), dict) else x
            return a
        errs = list(v.iter_errors(merge(base, yaml.safe_load(open(f)))))
    if errs:
        sys.exit(f"FAIL: {f}: " + "; ".join(e.message for e in errs))
bad = yaml.safe_load(open(f"{chart}/values.yaml"))
for k, x in yaml.safe_load(open(typo)).items():
    bad[k] = {**bad[k], **x} if isinstance(x, dict) else x
bad["metrics"]["agentPort"] = "9401"
msgs = " | ".join(e.message for e in v.iter_errors(bad))
for needle in ("'gpusPerNod' was unexpected", "'zstd' is not one of", "'9401' is not of type 'integer'"):
    if needle not in msgs:
        sys.exit(f"FAIL: jsonschema did not report {needle!r}: {msgs}")
print("values.schema.json: values.yaml, ci/p40-values.yaml and the mixed pools valid, the typo file rejected")
PY

# 2. Helm applies the schema too.
if render -f "$work/typo.yaml" >"$work/typo.out" 2>&1; then echo "FAIL: typo values rendered"; exit 1; fi
grep -q "values don't meet the specifications of the schema" "$work/typo.out"
grep -q "gpusPerNod" "$work/typo.out" || { cat "$work/typo.out"; echo "FAIL: typo not named"; exit 1; }

# 3. Render and validate: defaults, the P40 example, and everything switched on.
cat >"$work/all-values.yaml" <<'YAML'
agent: {gpusPerNode: 8, hostNetwork: true, rack: r7, inventoryOverride: "8xA100:sm_80:80GiB", logMaxBytes: 1048576, logKeep: 3,
        sharedStorage: {hostPath: /mnt/shared}, trainerEnv: {NCCL_SOCKET_IFNAME: ib0}}
persistence: {enabled: false}
metrics: {coordinatorPort: 9410, agentPort: 9411, serviceMonitor: {enabled: true}}
rbac: {operators: [{kind: Group, name: ops, apiGroup: rbac.authorization.k8s.io}]}
images: {pullSecrets: [regcred]}
tls: {enabled: true, existingSecret: my-tls}
YAML
cat >"$work/nometrics-values.yaml" <<'YAML'
metrics: {serviceMonitor: {enabled: false}}
networkPolicy: {metricsFrom: []}
YAML
for v in default p40 all nometrics mixed; do
  case $v in default) args=() ;; p40) args=(-f "$CHART/ci/p40-values.yaml") ;; *) args=(-f "$work/$v-values.yaml") ;; esac
  render "${args[@]}" >"$work/$v.yaml"
  "$PY" scripts/validate-manifests.py "$work/$v.yaml" >"$work/$v.txt" || { cat "$work/$v.txt"; exit 1; }
  echo "$v: $(tail -1 "$work/$v.txt")"
  render --notes "${args[@]}" >"$work/$v.notes"
  grep -q "Coordinator (gRPC): rm-ringmaster-coordinator.ringmaster.svc:7070" "$work/$v.notes"
done
grep -q "^ok .* ServiceMonitor/" "$work/p40.txt"
grep -q "image: ringmaster/agent:0.1.0-cuda12" "$work/p40.yaml"
grep -q "nvidia.com/gpu: 4" "$work/p40.yaml"
grep -q "compression: int8" "$work/p40.yaml"
grep -q "NCCL_SOCKET_IFNAME=eth0" "$work/p40.yaml"
grep -q "hostNetwork: true" "$work/p40.yaml"
grep -q "compression: auto" "$work/default.yaml"

# 4. Labels, and the flags the chart passes exist in the binaries.
"$PY" - "$BIN" "$work/default.yaml" "$work/all.yaml" "$work/mixed.yaml" <<'PY'
import subprocess, sys, yaml
binaries = {"coordinator": f"{sys.argv[1]}/coordinator/ringmaster-coordinator",
            "agent": f"{sys.argv[1]}/agent/ringmaster-agent"}
usage = {k: subprocess.run([b, "--help"], capture_output=True, text=True, check=True).stdout
         for k, b in binaries.items()}
for f in sys.argv[2:]:
    for d in yaml.safe_load_all(open(f)):
        labels = d["metadata"].get("labels") or {}
        for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                  "app.kubernetes.io/managed-by", "helm.sh/chart"):
            if k not in labels:
                sys.exit(f"FAIL: {d['kind']}/{d['metadata']['name']} lacks label {k}")
        if d["kind"] in ("StatefulSet", "DaemonSet"):
            c = d["spec"]["template"]["spec"]["containers"][0]
            comp = c["name"]
            for a in c.get("args", []):
                if a.startswith("--"):
                    flag = a.split("=", 1)[0]
                    if comp == "coordinator" and "=" in a:
                        sys.exit(f"FAIL: the coordinator takes '--flag value', got {a}")
                    if flag + " " not in usage[comp] and flag + "\n" not in usage[comp]:
                        sys.exit(f"FAIL: {comp} has no flag {flag} ({f})")
print("labels and flags: ok")
PY

# 5. Metrics wiring (issue #6): default ports, and the "all" values' 9410/9411.
"$PY" - "$work/default.yaml" 9400 9401 "$work/all.yaml" 9410 9411 "$work/p40.yaml" 9400 9401 <<'PY'
import sys, yaml
def fail(msg):
    sys.exit(f"FAIL: {msg}")
args = sys.argv[1:]
for f, cport, aport in zip(args[0::3], map(int, args[1::3]), map(int, args[2::3])):
    docs = [d for d in yaml.safe_load_all(open(f)) if d]
    kinds = lambda k: [d for d in docs if d["kind"] == k]
    (c,) = [d["spec"]["template"]["spec"]["containers"][0] for d in kinds("StatefulSet")]
    (a,) = [d["spec"]["template"]["spec"]["containers"][0] for d in kinds("DaemonSet")]
    want = ["--metrics-listen", f"0.0.0.0:{cport}"]
    if not any(c["args"][i:i + 2] == want for i in range(len(c["args"]))):
        fail(f"{f}: coordinator args lack {' '.join(want)}")
    if {"name": "metrics", "containerPort": cport, "protocol": "TCP"} not in c["ports"]:
        fail(f"{f}: coordinator has no container port metrics {cport}")
    if f"--metrics-listen=0.0.0.0:{aport}" not in a["args"]:
        fail(f"{f}: agent args lack --metrics-listen=0.0.0.0:{aport}: {a['args']}")
    if a["ports"] != [{"name": "metrics", "containerPort": aport, "protocol": "TCP"}]:
        fail(f"{f}: agent ports {a['ports']}: want only metrics {aport} (no trainer ports)")
    for cm in kinds("ConfigMap"):
        if "RINGMASTER_METRICS_PORT=" in (cm.get("data") or {}).get("trainer.env", ""):
            fail(f"{f}: trainer.env sets RINGMASTER_METRICS_PORT: the agent's page already has every rank")
    for sm in kinds("ServiceMonitor"):
        spec = sm["spec"]
        if [e["port"] for e in spec["endpoints"]] != ["metrics"]:
            fail(f"{f}: ServiceMonitor endpoints {spec['endpoints']}")
        jobs = {}
        for s in kinds("Service"):
            labels = s["metadata"]["labels"]
            if all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()):
                (p,) = [p for p in s["spec"]["ports"] if p["name"] == "metrics"]
                jobs[labels.get(spec.get("jobLabel", ""), s["metadata"]["name"])] = (p["port"], p["targetPort"])
        if jobs != {"ringmaster-coordinator": (cport, "metrics"), "ringmaster-agent": (aport, "metrics")}:
            fail(f"{f}: ServiceMonitor scrape jobs (name: port, targetPort) {jobs}")
    if "all.yaml" in f and not kinds("ServiceMonitor"):
        fail("no ServiceMonitor with serviceMonitor.enabled")
    for np in kinds("NetworkPolicy"):
        if np["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "agent":
            fail(f"{f}: a NetworkPolicy selects the agents: check it admits Prometheus to {aport}")
        if not any({"port": "metrics", "protocol": "TCP"} in r.get("ports", []) for r in np["spec"]["ingress"]):
            fail(f"{f}: NetworkPolicy admits no one to the coordinator's metrics port")
print("metrics: --metrics-listen on both, scrape jobs ringmaster-coordinator and ringmaster-agent")
PY
grep -q "scrape jobs ringmaster-coordinator (port 9410) and ringmaster-agent (port 9411" "$work/all.notes"

# 6. Agent pools (mixed values): a DaemonSet per pool selecting only its own pods, the shared
# metrics Service, NetworkPolicy and PDB select them all, no node can match two pools, the CPU
# pool requests no GPU and runs images.cpuAgent. Metrics off: no ServiceMonitor, no metrics rule.
"$PY" - "$work/mixed.yaml" "$work/nometrics.yaml" <<'PY'
import sys, yaml
def fail(msg):
    sys.exit(f"FAIL: {msg}")
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}
if sorted(ds) != ["rm-ringmaster-agent", "rm-ringmaster-agent-cpu", "rm-ringmaster-agent-p40"]:
    fail(f"DaemonSets {sorted(ds)}")
def selects(sel, labels):
    return all(labels.get(k) == v for k, v in sel.items())
pods = {n: d["spec"]["template"]["metadata"]["labels"] for n, d in ds.items()}
for n, d in ds.items():
    owned = [m for m, l in pods.items() if selects(d["spec"]["selector"]["matchLabels"], l)]
    if owned != [n]:
        fail(f"{n} selects the pods of {owned}")
    for other in (x for x in docs if x["kind"] in ("Service", "NetworkPolicy", "PodDisruptionBudget")):
        sel = other["spec"].get("selector") or other["spec"].get("podSelector")
        sel = sel.get("matchLabels", sel)
        if other["kind"] == "NetworkPolicy":  # the agents are among the gRPC clients it admits
            sel = other["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
        if sel.get("app.kubernetes.io/component") == "agent" and not selects(sel, pods[n]):
            fail(f"{other['kind']}/{other['metadata']['name']} does not select pool {n}")
nodesel = {n: d["spec"]["template"]["spec"].get("nodeSelector") or {} for n, d in ds.items()}
names = sorted(ds)
for i, a in enumerate(names):
    for b in names[i + 1:]:
        if not any(k in nodesel[b] and nodesel[b][k] != v for k, v in nodesel[a].items()):
            fail(f"a node can match both {a} {nodesel[a]} and {b} {nodesel[b]}")
def container(n):
    return ds[n]["spec"]["template"]["spec"]["containers"][0]
want = {"rm-ringmaster-agent": ("ringmaster/agent:0.1.0-cuda13", 1),
        "rm-ringmaster-agent-p40": ("ringmaster/agent:0.1.0-cuda12", 4),
        "rm-ringmaster-agent-cpu": ("registry.invalid/ringmaster-agent-cpu:7", None)}
for n, (image, gpus) in want.items():
    c = container(n)
    got = (c["image"], c["resources"]["limits"].get("nvidia.com/gpu"), c["resources"]["requests"].get("nvidia.com/gpu"))
    if got != (image, gpus, gpus):
        fail(f"{n}: image, GPU limit, GPU request {got}, want {(image, gpus, gpus)}")
if ds["rm-ringmaster-agent-cpu"]["spec"]["template"]["spec"].get("tolerations"):
    fail("the CPU pool kept the GPU taint's toleration")
if container("rm-ringmaster-agent-cpu")["resources"]["requests"]["cpu"] != "16":
    fail("the CPU pool's resources are not its own")
nm = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
if any(d["kind"] == "ServiceMonitor" for d in nm):
    fail("metrics off: a ServiceMonitor was rendered")
(np,) = [d for d in nm if d["kind"] == "NetworkPolicy"]
if any({"port": "metrics", "protocol": "TCP"} in r.get("ports", []) for r in np["spec"]["ingress"]):
    fail("metrics off: the NetworkPolicy still admits someone to the metrics port")
print("pools: 3 DaemonSets, own selectors, disjoint node selectors, CPU pool without GPUs; metrics off: ok")
PY
grep -q "Agent pool cpu: one per node matching {\"nvidia.com/gpu.product\":\"none\"}, 0 GPU(s) each, image registry.invalid/ringmaster-agent-cpu:7" "$work/mixed.notes"
# A pool named "default", and a CPU pool with GPUs, are refused.
printf 'agentPools: [{name: default}]\n' >"$work/pool-default.yaml"
if render -f "$work/pool-default.yaml" >/dev/null 2>"$work/pool.txt"; then echo "FAIL: pool 'default' rendered"; exit 1; fi
grep -q "agentPools/0/name" "$work/pool.txt" || { cat "$work/pool.txt"; exit 1; }
printf 'agentPools: [{name: c, flavor: cpu, gpusPerNode: 2}]\n' >"$work/pool-cpu.yaml"
if render -f "$work/pool-cpu.yaml" >/dev/null 2>"$work/pool.txt"; then echo "FAIL: a CPU pool with GPUs rendered"; exit 1; fi
grep -q 'agent pool "c": the cpu image has no CUDA' "$work/pool.txt" || { cat "$work/pool.txt"; exit 1; }

# 7. The checks must be able to fail: a template emitting a misspelt field is caught, a reference
# to a value the chart lacks fails strict rendering, and lint (not only rendering) is in effect.
cp -r "$CHART" "$work/chart"
sed -i 's/automountServiceAccountToken: false/automountServiceAccountTokens: false/' "$work/chart/templates/agent.yaml"
"$PY" scripts/render-chart.py --strict "$work/chart" >"$work/broken.yaml"
if "$PY" scripts/validate-manifests.py "$work/broken.yaml" >"$work/broken.txt"; then
  echo "FAIL: a misspelt field in a template passed"; exit 1
fi
grep -qF "'automountServiceAccountTokens' was unexpected" "$work/broken.txt"
sed -i 's/$a.shmSize/$a.shmSizee/' "$work/chart/templates/agent.yaml"
if "$PY" scripts/render-chart.py --strict "$work/chart" >/dev/null 2>"$work/strict.txt"; then
  echo "FAIL: --strict rendered a reference to a missing value"; exit 1
fi
grep -q "shmSizee" "$work/strict.txt" || { cat "$work/strict.txt"; exit 1; }
cp -r "$CHART" "$work/chart2"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: {}\n' >"$work/chart2/templates/bad.yaml"
"$PY" scripts/render-chart.py "$work/chart2" >/dev/null  # the engine alone renders it
if "$PY" scripts/render-chart.py --strict "$work/chart2" >/dev/null 2>"$work/lint.txt"; then
  echo "FAIL: lint passed a template that is not YAML"; exit 1
fi
grep -q "templates/bad.yaml" "$work/lint.txt" || { cat "$work/lint.txt"; exit 1; }
echo "deploy_helm_chart: 1 passed, 0 failed"
