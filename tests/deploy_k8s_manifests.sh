#!/usr/bin/env bash
# ctest-labels: deploy
# k8s/: yamllint passes and every manifest validates offline against the Kubernetes API schemas
# (1.25 and 1.37, strict) and the Prometheus Operator's ServiceMonitor schema, with the
# cross-object checks of scripts/validate-manifests.py. A copy with a misspelt field, a wrong
# type, a ServiceMonitor typo and a dangling port name must be rejected.
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

# The checks must be able to fail.
mkdir "$work/bad"
cp k8s/*.yaml "$work/bad/"
sed -i 's/terminationGracePeriodSeconds: 60/terminationGracePeriodSecond: 60/' "$work/bad/agent-daemonset.yaml"
sed -i 's/^  replicas: 1$/  replicas: "one"/' "$work/bad/coordinator-statefulset.yaml"
sed -i 's/      interval: 30s/      intervall: 30s/' "$work/bad/servicemonitor.yaml"
sed -i 's/targetPort: trainer-0/targetPort: trainer-7/' "$work/bad/services.yaml"
if "$PY" scripts/validate-manifests.py "$work"/bad/*.yaml >"$work/bad.txt"; then
  echo "FAIL: broken manifests were accepted"; exit 1
fi
for needle in "'terminationGracePeriodSecond' was unexpected" "'one' is not of type 'integer'" \
  "'intervall' was unexpected" "targetPort trainer-7 is not a container port"; do
  grep -qF "$needle" "$work/bad.txt" || { echo "FAIL: not reported: $needle"; cat "$work/bad.txt"; exit 1; }
done
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1}\n' >"$work/bad-type.yaml"
if "$PY" scripts/validate-manifests.py "$work/bad-type.yaml" >/dev/null; then echo "FAIL: ConfigMap data 1 accepted"; exit 1; fi
printf 'key: [unclosed\n' >"$work/bad.yaml"
if yamllint -d default "$work/bad.yaml" >/dev/null; then echo "FAIL: yamllint accepted broken YAML"; exit 1; fi
echo "deploy_k8s_manifests: 1 passed, 0 failed"
