#!/usr/bin/env bash
# ctest-labels: integration
# The alert rules and the Grafana dashboard (issue #6, docs/dashboards.md), without a server:
#   1. `promtool check rules` accepts docs/prometheus/alerts.yml, and a copy with a PromQL syntax
#      error is rejected;
#   2. `promtool test rules` passes docs/prometheus/alerts_test.yml (a firing and a non-firing
#      case per alert), and fails once a threshold in a copy of the rules is changed;
#   3. docs/grafana/ringmaster.json is valid JSON, every panel with queries uses the
#      `${datasource}` variable, ids are unique, panels do not overlap, the variables are there
#      (and a copy with a panel's datasource removed is rejected); its PromQL parses (promtool);
#   4. tools/check-promql-names.py --self-test passes, and the dashboard and rules use only names
#      of the metric catalogue (tests/lib/metric_catalogue.prom). The check against the pages the
#      real processes serve is an integration test's.
# Skips (77) only without promtool (Debian: package prometheus, scripts/setup.sh).
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
command -v promtool >/dev/null || { echo "no promtool (scripts/setup.sh installs prometheus)"; exit 77; }
PY=$(command -v python3 || true)
PY=${PY:-${RINGMASTER_PYTHON:-}}
[[ -n $PY ]] || { echo "FAIL: no python3"; exit 1; }
RULES=$ROOT/docs/prometheus/alerts.yml
TESTS=$ROOT/docs/prometheus/alerts_test.yml
DASH=$ROOT/docs/grafana/ringmaster.json
CHECK=$ROOT/tools/check-promql-names.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. Rules parse; a broken copy does not. yamllint (when installed) as for the Helm chart; the test
# file's input series may be long.
promtool check rules "$RULES"
if command -v yamllint >/dev/null; then
  yamllint -s -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable}}' "$RULES"
  yamllint -s -d '{extends: default, rules: {line-length: disable, document-start: disable}}' "$TESTS"
fi
sed 's/increase(ringmaster_job_restarts_total\[15m\]) >= 3/increase(ringmaster_job_restarts_total[15m] >= 3/' \
  "$RULES" >"$work/broken.yml"
! cmp -s "$RULES" "$work/broken.yml" || fail "could not break a copy of the rules (expression changed?)"
if promtool check rules "$work/broken.yml" >"$work/broken.out" 2>&1; then
  cat "$work/broken.out"; fail "promtool accepted rules with a syntax error"
fi
echo "ok: promtool rejects a rule with a syntax error"

# 2. Unit tests pass; with a changed threshold they fail.
(cd "$(dirname "$TESTS")" && promtool test rules "$(basename "$TESTS")")
mkdir "$work/mut"
cp "$TESTS" "$work/mut/"
sed 's/> 300$/> 200/' "$RULES" >"$work/mut/alerts.yml"
! cmp -s "$RULES" "$work/mut/alerts.yml" || fail "could not change the TrainerStuck threshold in a copy"
if (cd "$work/mut" && promtool test rules "$(basename "$TESTS")") >"$work/mut.out" 2>&1; then
  cat "$work/mut.out"; fail "promtool test rules passed with the TrainerStuck threshold at 200 s"
fi
grep -q RingmasterTrainerStuck "$work/mut.out" || { cat "$work/mut.out"; fail "the failure does not name the alert"; }
echo "ok: the unit tests catch a changed threshold"

# 3. The dashboard.
lint_dashboard() {
  "$PY" - "$1" <<'PY'
import json, sys
path = sys.argv[1]
errors = []
try:
    d = json.load(open(path, encoding="utf-8"))
except ValueError as e:
    sys.exit("invalid JSON: %s" % e)
if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
    errors.append("schemaVersion %r (want >= 36)" % d.get("schemaVersion"))
for k in ("title", "uid", "panels", "templating"):
    if k not in d:
        errors.append("no %s" % k)
variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
ds = variables.get("datasource", {})
if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
    errors.append("no Prometheus datasource variable 'datasource'")
job = variables.get("ringmaster_job", {})
q = job.get("query")
q = q.get("query") if isinstance(q, dict) else q
if job.get("type") != "query" or q != "label_values(ringmaster_job_phase, ringmaster_job)":
    errors.append("variable ringmaster_job is not label_values(ringmaster_job_phase, ringmaster_job): %r" % q)
if (job.get("datasource") or {}).get("uid") != "${datasource}":
    errors.append("variable ringmaster_job does not use ${datasource}")
flat = []
def walk(ps):
    for p in ps:
        flat.append(p)
        walk(p.get("panels") or [])
walk(d.get("panels", []))
ids = [p.get("id") for p in flat]
if len(ids) != len(set(ids)) or None in ids:
    errors.append("panel ids missing or not unique: %r" % ids)
cells = {}
queries = 0
for p in flat:
    title = p.get("title")
    g = p.get("gridPos") or {}
    if not all(isinstance(g.get(k), int) for k in ("x", "y", "w", "h")) or g["x"] + g["w"] > 24:
        errors.append("panel %r: bad gridPos %r" % (title, g))
        continue
    for x in range(g["x"], g["x"] + g["w"]):
        for y in range(g["y"], g["y"] + g["h"]):
            if (x, y) in cells:
                errors.append("panels %r and %r overlap" % (cells[(x, y)], title))
                break
            cells[(x, y)] = title
        else:
            continue
        break
    targets = p.get("targets") or []
    if p.get("type") in ("row", "text"):
        continue
    if not targets:
        errors.append("panel %r (%s) has no queries" % (title, p.get("type")))
    if (p.get("datasource") or {}).get("uid") != "${datasource}":
        errors.append("panel %r: datasource is not ${datasource}" % title)
    for t in targets:
        queries += 1
        if not (t.get("expr") or "").strip() or not t.get("refId"):
            errors.append("panel %r: a target without expr or refId" % title)
        if "datasource" in t and (t["datasource"] or {}).get("uid") != "${datasource}":
            errors.append("panel %r target %s: datasource is not ${datasource}" % (title, t.get("refId")))
    if "DCGM" in json.dumps(targets):
        errors.append("panel %r queries GPU metrics (not exported yet)" % title)
titles = " | ".join(str(p.get("title")) for p in flat)
for want in ("Samples/s", "Tokens/s", "Loss", "Learning rate", "Step time", "Communication time",
             "raw vs compressed", "Compression factor", "Data-loader wait", "Straggler", "stall",
             "Missing ranks", "Rendezvous", "Nodes by state", "Heartbeat", "Checkpoint seconds",
             "GPU memory", "Phase", "World size", "Restarts", "Generation", "Committed step"):
    if want.lower() not in titles.lower():
        errors.append("no panel titled like %r" % want)
for e in errors:
    print("dashboard:", e)
if errors:
    sys.exit(1)
print("ok: dashboard %s: %d panels, %d queries, all on ${datasource}" % (path, len(flat), queries))
PY
}
lint_dashboard "$DASH" || fail "dashboard lint"
"$PY" - "$DASH" "$work/nods.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d["panels"] if p.get("targets"))
del p["datasource"]
json.dump(d, open(sys.argv[2], "w"))
PY
if lint_dashboard "$work/nods.json" >"$work/nods.out"; then
  cat "$work/nods.out"; fail "the lint accepted a panel without a datasource"
fi
grep -q "datasource is not" "$work/nods.out" || { cat "$work/nods.out"; fail "wrong lint message"; }
echo "ok: the lint rejects a panel without a datasource"
"$PY" "$CHECK" --dashboard "$DASH" --write-rules "$work/dashboard_exprs.yml"
promtool check rules "$work/dashboard_exprs.yml"

# 4. Metric names.
"$PY" "$CHECK" --self-test
"$PY" "$CHECK" --dashboard "$DASH" --rules "$RULES" --exported "$ROOT/tests/lib/metric_catalogue.prom"
echo "PASS"
