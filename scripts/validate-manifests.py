#!/usr/bin/env python3
"""Checks Kubernetes manifests offline, without a cluster.

  validate-manifests.py [--kube-version 1.25.0]... FILE.yaml|- ...

Every YAML document must be an object with apiVersion and kind, and must pass:
  * built-in kinds: the Kubernetes API's JSON schema for each --kube-version, strict (unknown
    fields rejected), from the kubernetes-validate package;
  * monitoring.coreos.com/v1 ServiceMonitor and PodMonitor (Prometheus Operator CRDs, unknown to
    kubernetes-validate): the JSON schema of the operator's v1 types as generated from its CRDs
    (package cloudcoil-models-prometheus-operator, via pydantic), made strict the same way
    (additionalProperties: false on every object that lists its properties);
  * cross-references inside the set: workload selectors match their pod templates, Services
    select a workload and name ports its containers declare, volume mounts name volumes,
    referenced ServiceAccounts and ConfigMaps exist, ServiceMonitor selectors find a Service
    and name ports such a Service has, NetworkPolicy port names exist on the selected pods.
Prints one line per document; exits 1 if anything fails.
"""
import argparse
import copy
import functools
import sys

import jsonschema
import kubernetes_validate
import yaml


def strictify(schema):
    """additionalProperties: false wherever an object lists its properties and says nothing."""
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for v in schema.values():
            strictify(v)
    elif isinstance(schema, list):
        for v in schema:
            strictify(v)
    return schema


@functools.lru_cache(maxsize=None)
def monitoring_validator(kind):
    from cloudcoil.models.prometheus_operator import v1  # slow import: only when needed

    model = {"ServiceMonitor": v1.ServiceMonitor, "PodMonitor": v1.PodMonitor}.get(kind)
    if model is None:
        return None
    schema = strictify(copy.deepcopy(model.model_json_schema(by_alias=True, mode="validation")))
    return jsonschema.Draft202012Validator(schema)


def schema_errors(doc, versions):
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if api == "monitoring.coreos.com/v1":
        validator = monitoring_validator(kind)
        if validator is None:
            return [f"no schema for {api} {kind}"]
        return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                for e in validator.iter_errors(doc)]
    errors = []
    for version in versions:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(map(str, e.path)) or "<root>"
            errors.append(f"[k8s {version}] {path}: {e.message}")
        except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
            errors.append(f"[k8s {version}] {e}")
    return errors


def pod_spec(doc):
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return (spec.get("template") or {}).get("spec") or {}
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    if kind == "Pod":
        return spec
    return None


def pod_labels(doc):
    if doc.get("kind") == "Pod":
        return (doc.get("metadata") or {}).get("labels") or {}
    return (((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_ports(doc):
    names, numbers = set(), set()
    for c in (pod_spec(doc) or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if "name" in p:
                names.add(p["name"])
            numbers.add(p.get("containerPort"))
    return names, numbers


def cross_check(docs):
    """docs: list of (label, doc). Returns a list of (label, message)."""
    out = []
    ns_of = lambda d: (d.get("metadata") or {}).get("namespace", "")
    by_kind = {}
    for label, d in docs:
        by_kind.setdefault(d.get("kind"), []).append((label, d))
    names = lambda kind, ns: {(d.get("metadata") or {}).get("name") for _, d in by_kind.get(kind, [])
                              if ns_of(d) == ns}
    workloads = [(l, d) for l, d in docs if pod_spec(d) is not None]
    for label, d in workloads:
        ns = ns_of(d)
        spec = pod_spec(d)
        if d.get("kind") != "Pod":
            sel = ((d.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if not matches(sel, pod_labels(d)):
                out.append((label, f"selector {sel} does not match the pod template's labels"))
        volumes = {v.get("name") for v in spec.get("volumes") or []}
        volumes |= {(t.get("metadata") or {}).get("name")
                    for t in (d.get("spec") or {}).get("volumeClaimTemplates") or []}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    out.append((label, f"container {c.get('name')} mounts undeclared volume {m.get('name')}"))
        sa = spec.get("serviceAccountName")
        if sa and sa not in names("ServiceAccount", ns):
            out.append((label, f"ServiceAccount {sa} is not defined"))
        for v in spec.get("volumes") or []:
            cm = v.get("configMap")
            if cm and not cm.get("optional") and cm.get("name") not in names("ConfigMap", ns):
                out.append((label, f"ConfigMap {cm.get('name')} (volume {v.get('name')}) is not defined"))
    for label, svc in by_kind.get("Service", []):
        sel = (svc.get("spec") or {}).get("selector") or {}
        targets = [d for _, d in workloads if ns_of(d) == ns_of(svc) and matches(sel, pod_labels(d))]
        if not targets:
            out.append((label, f"selector {sel} selects no workload"))
            continue
        for p in (svc.get("spec") or {}).get("ports") or []:
            tp = p.get("targetPort", p.get("port"))
            ok = any((tp in container_ports(t)[0]) if isinstance(tp, str) else
                     (tp in container_ports(t)[1]) for t in targets)
            if not ok:
                out.append((label, f"port {p.get('name')}: targetPort {tp} is not a container port of the selected pods"))
    for label, np in by_kind.get("NetworkPolicy", []):
        sel = ((np.get("spec") or {}).get("podSelector") or {}).get("matchLabels") or {}
        targets = [d for _, d in workloads if ns_of(d) == ns_of(np) and matches(sel, pod_labels(d))]
        if not targets:
            out.append((label, f"podSelector {sel} selects no workload"))
        for rule in (np.get("spec") or {}).get("ingress") or []:
            for p in rule.get("ports") or []:
                if isinstance(p.get("port"), str) and not any(p["port"] in container_ports(t)[0] for t in targets):
                    out.append((label, f"port {p['port']} is not a container port of the selected pods"))
    for label, sm in by_kind.get("ServiceMonitor", []):
        sel = (((sm.get("spec") or {}).get("selector") or {}).get("matchLabels")) or {}
        svcs = [s for _, s in by_kind.get("Service", [])
                if matches(sel, (s.get("metadata") or {}).get("labels") or {})]
        if not svcs:
            out.append((label, f"selector {sel} selects no Service"))
        for ep in (sm.get("spec") or {}).get("endpoints") or []:
            port = ep.get("port")
            if port and not any(port in {p.get("name") for p in (s.get("spec") or {}).get("ports") or []}
                                for s in svcs):
                out.append((label, f"endpoint port {port} is on none of the selected Services"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kube-version", action="append", dest="versions",
                    help="Kubernetes version(s) to validate against (default: 1.25.0 and 1.37.0)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    versions = args.versions or ["1.25.0", "1.37.0"]
    failed = False
    docs = []
    for f in args.files:
        text = sys.stdin.read() if f == "-" else open(f, encoding="utf-8").read()
        try:
            loaded = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            print(f"FAIL {f}: YAML: {e}")
            failed = True
            continue
        for i, doc in enumerate(loaded):
            if doc is None:
                continue
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                print(f"FAIL {f}#{i}: not an object with apiVersion and kind")
                failed = True
                continue
            label = f"{f}#{i} {doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
            errors = schema_errors(doc, versions)
            for e in errors:
                print(f"FAIL {label}: {e}")
            failed |= bool(errors)
            if not errors:
                print(f"ok   {label}")
            docs.append((label, doc))
    for label, message in cross_check(docs):
        print(f"FAIL {label}: {message}")
        failed = True
    print(f"validate-manifests: {len(docs)} documents, {'FAILED' if failed else 'all valid'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
