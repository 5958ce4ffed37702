#!/usr/bin/env python3
"""Checks that every metric name the Grafana dashboard and the alert rules use is exported.

  check-promql-names.py --dashboard docs/grafana/ringmaster.json \
      --rules docs/prometheus/alerts.yml --exported PAGE.txt [PAGE.txt ...]
  check-promql-names.py --dashboard D.json --rules R.yml --write-rules OUT.yml
  check-promql-names.py --self-test

Names are taken from the dashboard's panel targets (`targets[].expr`, rows' nested panels too)
and templating queries (`label_values(metric, label)`, `query_result(expr)`), and from every
`expr:` of the rules file. Each PAGE is a /metrics page in Prometheus' text format; a name is
exported when a sample or a `# TYPE` / `# HELP` line names it (a histogram `x` exports
x_bucket, x_sum and x_count; a summary x, x_sum and x_count). Prometheus' own series (`up`,
`scrape_*`, `ALERTS`) are always allowed.

Prints each unknown name with where it is used (panel title / alert name) and exits 1; exits 0
with a summary line when all are exported; 2 on a usage or input error.
--write-rules writes the dashboard's expressions as recording rules (Grafana's interval
variables replaced by durations) so that `promtool check rules OUT.yml` parses them.
--self-test runs built-in cases: a misspelled name must be caught and a correct set accepted.
Python 3 standard library only (the rules file is read by a small YAML subset reader).
"""
import argparse
import json
import os
import re
import sys
import tempfile

# Series Prometheus itself writes for every target / alert.
PROMETHEUS_OWN = {
    "up", "scrape_duration_seconds", "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling", "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE",
}
# Keywords that look like identifiers but never name a metric.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "atan2", "inf", "nan"}
# Aggregation operators: reserved words, followed by `(` or by `by (...)` / `without (...)`.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
# Keywords followed by a parenthesised list of label names.
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Grafana's interval variables, replaced for --write-rules (and harmless for name extraction).
GRAFANA_DURATIONS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h",
                     "__interval_ms": "60000", "__range_s": "3600", "__range_ms": "3600000"}

IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[A-Za-z0-9_]*")


class PromQLError(ValueError):
    pass


def substitute_grafana_variables(expr, replace_others=False):
    """Replaces $__rate_interval etc. by durations; other $var / ${var} / [[var]] by 'x' if asked.

    Only outside string literals, where a variable would otherwise read as an identifier."""
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        name = name.split(":")[0]
        if name in GRAFANA_DURATIONS:
            return GRAFANA_DURATIONS[name]
        return "1" if replace_others else m.group(0)
    out, i = [], 0
    var = re.compile(r"\$\{([A-Za-z0-9_:.]+)\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_:.]+)\]\]")
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            j = skip_string(expr, i)
            out.append(expr[i:j])
            i = j
            continue
        m = var.match(expr, i)
        if m:
            out.append(repl(m))
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def skip_string(s, i):
    """Index just past the string literal that starts at s[i]."""
    q = s[i]
    j = i + 1
    while j < len(s):
        if s[j] == "\\" and q != "`":
            j += 2
            continue
        if s[j] == q:
            return j + 1
        j += 1
    raise PromQLError("unterminated string literal at offset %d" % i)


def skip_balanced(s, i, open_c, close_c):
    """Index just past the bracket that closes s[i] == open_c (strings inside skipped)."""
    depth = 0
    j = i
    while j < len(s):
        c = s[j]
        if c in "\"'`":
            j = skip_string(s, j)
            continue
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise PromQLError("unbalanced %r at offset %d" % (open_c, i))


def skip_space(s, i):
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def metric_names(expr):
    """The metric names a PromQL expression selects, in order of appearance (may repeat)."""
    s = substitute_grafana_variables(expr, replace_others=True)
    names = []
    i = 0
    while i < len(s):
        c = s[i]
        if c in " \t\r\n":
            i += 1
        elif c == "#":  # comment to the end of the line
            nl = s.find("\n", i)
            i = len(s) if nl < 0 else nl + 1
        elif c in "\"'`":
            i = skip_string(s, i)
        elif c == "{":  # label matchers: label names and strings, except __name__="x"
            j = skip_balanced(s, i, "{", "}")
            for m in re.finditer(r"__name__\s*=\s*([\"'`])([^\"'`]*)\1", s[i:j]):
                names.append(m.group(2))
            i = j
        elif c == "[":  # range or subquery: durations
            i = skip_balanced(s, i, "[", "]")
        elif c.isdigit() or (c == "." and i + 1 < len(s) and s[i + 1].isdigit()):
            m = NUMBER.match(s, i)
            i = m.end() if m else i + 1
        elif IDENT.match(s, i):
            m = IDENT.match(s, i)
            word = m.group(0)
            j = skip_space(s, m.end())
            low = word.lower()
            if low in LABEL_LIST_KEYWORDS:
                i = skip_balanced(s, j, "(", ")") if j < len(s) and s[j] == "(" else j
            elif low == "offset":  # offset 5m / offset -1h
                j2 = j + 1 if j < len(s) and s[j] == "-" else j
                m2 = NUMBER.match(s, j2)
                i = m2.end() if m2 else j
            elif low in KEYWORDS or low in AGGREGATIONS:
                i = j
            elif j < len(s) and s[j] == "(":  # function or aggregation operator
                i = j
            else:
                names.append(word)
                i = m.end()
        elif c == "@":  # @ 1609746000 / @ start() / @ end()
            j = skip_space(s, i + 1)
            m2 = NUMBER.match(s, j)
            if m2:
                i = m2.end()
            else:
                m3 = IDENT.match(s, j)
                i = m3.end() if m3 else j
        else:
            i += 1
    return names


def split_args(s):
    """Top-level comma separated arguments of a call's argument text."""
    args, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            j = skip_string(s, i)
            cur.append(s[i:j])
            i = j
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    args.append("".join(cur).strip())
    return args


def template_query_exprs(query):
    """PromQL selectors/expressions inside a Grafana Prometheus variable query."""
    q = query.strip()
    m = re.match(r"^(label_values|query_result|label_names|metrics)\s*\((.*)\)\s*$", q, re.S)
    if not m:
        return [q] if q else []  # a plain expression
    fn, inner = m.group(1), m.group(2)
    if fn == "query_result":
        return [inner]
    if fn == "label_values":
        args = split_args(inner)
        return [args[0]] if len(args) >= 2 else []  # label_values(label): no metric
    if fn == "label_names":
        return [inner] if inner.strip() else []
    return []  # metrics(regex): a pattern, not a name


def dashboard_exprs(path):
    """(where, expr) for every PromQL expression of a Grafana dashboard JSON file."""
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    if "dashboard" in dash and isinstance(dash["dashboard"], dict):  # API export wrapper
        dash = dash["dashboard"]
    out = []

    def walk(panels):
        for p in panels or []:
            title = p.get("title") or "(untitled)"
            for t in p.get("targets") or []:
                if isinstance(t, dict) and isinstance(t.get("expr"), str) and t["expr"].strip():
                    out.append(("panel %r (id %s, refId %s)" % (title, p.get("id"), t.get("refId")),
                                t["expr"]))
            walk(p.get("panels"))

    walk(dash.get("panels"))
    for v in (dash.get("templating") or {}).get("list") or []:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query") or ""
        if not isinstance(q, str):
            continue
        for e in template_query_exprs(q):
            out.append(("variable $%s" % v.get("name"), e))
    return out


# --- rules file: a small YAML reader for Prometheus rule files -----------------------------------

BLOCK = re.compile(r"^[|>][-+0-9]*\s*(#.*)?$")
KEY = re.compile(r"^(\s*)(-\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*?)|\s*)$")


def yaml_scalar(v):
    v = v.strip()
    if v.startswith('"'):
        return json.loads(v[: v.rindex('"') + 1]) if v.count('"') >= 2 else v
    if v.startswith("'"):
        return v[1: v.rindex("'")].replace("''", "'")
    return re.sub(r"\s+#.*$", "", v)


def rules_exprs(path):
    """(where, expr) for every `expr:` of a Prometheus rules file (alert / record names)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    items, cur = [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        m = KEY.match(line)
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        col = indent + (len(m.group(2)) if m.group(2) else 0)
        if m.group(2):
            cur = {"line": i + 1}
            items.append(cur)
        key, val = m.group(3), (m.group(4) or "")
        i += 1
        if BLOCK.match(val):  # block scalar: the more indented lines that follow
            body = []
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > col):
                body.append(lines[i])
                i += 1
            nonblank = [b for b in body if b.strip()]
            cut = min((len(b) - len(b.lstrip()) for b in nonblank), default=0)
            value = "\n".join(b[cut:] for b in body).strip()
        elif val:
            # a plain or quoted scalar may continue on more indented lines
            parts = [val]
            while i < len(lines) and lines[i].strip() and \
                    len(lines[i]) - len(lines[i].lstrip()) > col and not KEY.match(lines[i]) and \
                    not lines[i].lstrip().startswith("- "):
                parts.append(lines[i].strip())
                i += 1
            value = yaml_scalar(" ".join(parts))
        else:
            continue  # a nested mapping or list follows
        if cur is not None and key in ("alert", "record", "expr"):
            cur[key] = value
    out = []
    for it in items:
        if "expr" in it:
            if "alert" in it:
                where = "alert %s" % it["alert"]
            elif "record" in it:
                where = "record %s" % it["record"]
            else:
                where = "rule at line %d" % it["line"]
            out.append((where, it["expr"]))
    return out


# --- exposition pages -------------------------------------------------------------------------

def exported_names(text):
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("TYPE", "HELP"):
                name = parts[2]
                names.add(name)
                kind = parts[3].strip() if parts[1] == "TYPE" and len(parts) > 3 else ""
                if kind in ("histogram", "gaugehistogram"):
                    names.update({name + "_bucket", name + "_sum", name + "_count"})
                elif kind == "summary":
                    names.update({name + "_sum", name + "_count"})
                elif kind == "counter" and not name.endswith("_total"):
                    names.add(name + "_total")  # OpenMetrics names the family without _total
            continue
        m = IDENT.match(line)
        if m:
            names.add(m.group(0))
    return names


def collect(dashboard, rules):
    uses = []  # (where, expr)
    if dashboard:
        uses += dashboard_exprs(dashboard)
    if rules:
        uses += rules_exprs(rules)
    return uses


def check(uses, exported):
    """{name: [where, ...]} for the names not exported, and the set of all names used."""
    unknown, used = {}, set()
    for where, expr in uses:
        try:
            names = metric_names(expr)
        except PromQLError as e:
            unknown.setdefault("<unparsable expression: %s>" % e, []).append(where)
            continue
        for n in names:
            used.add(n)
            if n not in exported and n not in PROMETHEUS_OWN:
                lst = unknown.setdefault(n, [])
                if where not in lst:
                    lst.append(where)
    return unknown, used


def write_rules(uses, path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Generated by tools/check-promql-names.py --write-rules: the dashboard's PromQL\n"
                "# as recording rules, for `promtool check rules`.\ngroups:\n"
                "  - name: dashboard-expressions\n    rules:\n")
        for k, (where, expr) in enumerate(uses):
            e = substitute_grafana_variables(expr)
            f.write("      - record: dashboard:expr_%d  # %s\n        expr: %s\n"
                    % (k, where.replace("\n", " "), json.dumps(e)))


def run_check(dashboard, rules, pages, out=sys.stdout):
    uses = collect(dashboard, rules)
    exported = set()
    for p in pages:
        with open(p, encoding="utf-8", errors="replace") as f:
            exported |= exported_names(f.read())
    unknown, used = check(uses, exported)
    if unknown:
        for name in sorted(unknown):
            print("unknown metric %s: used in %s" % (name, "; ".join(unknown[name])), file=out)
        print("check-promql-names: %d of %d names not exported by %d page(s)"
              % (len(unknown), len(used), len(pages)), file=out)
        return 1
    print("check-promql-names: OK, %d names in %d expressions, all exported by %d page(s)"
          % (len(used), len(uses), len(pages)), file=out)
    return 0


# --- self test --------------------------------------------------------------------------------

SELF_TEST_PAGE = """\
# HELP demo_samples_total Samples.
# TYPE demo_samples_total counter
demo_samples_total{ringmaster_job="j",rank="0"} 12
# TYPE demo_step_seconds histogram
demo_step_seconds_bucket{le="0.1"} 1
demo_step_seconds_bucket{le="+Inf"} 2
demo_step_seconds_sum 0.3
demo_step_seconds_count 2
# HELP demo_phase Phase.
# TYPE demo_phase gauge
demo_phase{ringmaster_job="j",name="n",phase="running"} 1
# TYPE demo_missing gauge
# TYPE demo_last_step_timestamp_seconds gauge
demo_last_step_timestamp_seconds 1.7e9
"""

SELF_TEST_RULES = """\
groups:
  - name: demo
    rules:
      - alert: DemoStuck   # comment
        expr: |
          (time() - max by (ringmaster_job) (demo_last_step_timestamp_seconds > 0))
          * on (ringmaster_job) group_left (name) (demo_phase{phase="running"} == 1) > 300
        for: 5m
        annotations:
          description: "expr: not_a_metric_in_an_annotation"
      - expr: demo_missing offset 5m > bool 1e3 unless on(rank) up{job="x"}
        record: demo:missing
      - alert: DemoQuoted
        expr: 'sum without (instance) (rate(demo_samples_total[5m] @ end())) > 0'
"""


def self_test_dashboard(expr_extra):
    return {
        "panels": [
            {"type": "row", "title": "r", "panels": [
                {"title": "Nested", "id": 9, "targets": [
                    {"refId": "A", "expr": "histogram_quantile(0.99, sum by (le, rank) "
                                           "(rate(demo_step_seconds_bucket{ringmaster_job=~\"$ringmaster_job\"}[$__rate_interval])))"}]}]},
            {"title": "Samples/s", "id": 1, "targets": [
                {"refId": "A", "expr": "sum by (ringmaster_job) (rate(demo_samples_total{wire=\"raw\", op!~'a|b'}[1m])) "
                                       "/ ignoring(op) group_right() count(demo_step_seconds_count) " + expr_extra},
                {"refId": "B", "expr": "label_replace(demo_phase, \"dst\", \"$1\", \"src\", \"(.*)\") "
                                       "or vector(0) and {__name__=\"demo_phase\"}"}]},
            {"title": "Text", "type": "text", "options": {"content": "demo_not_an_expr"}}],
        "templating": {"list": [
            {"name": "ringmaster_job", "type": "query",
             "query": {"query": "label_values(demo_phase{phase=\"running\"}, ringmaster_job)"}},
            {"name": "rank", "type": "query", "query": "label_values(rank)"},
            {"name": "ds", "type": "datasource", "query": "prometheus"}]},
    }


def self_test():
    failures = []

    def expect(cond, what):
        print("%s: %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            failures.append(what)

    cases = {
        'sum by (ringmaster_job) (rate(foo_total{a="b",c=~"x|y"}[1m]))': ["foo_total"],
        "a_metric offset 5m and bool_thing": ["a_metric", "bool_thing"],
        "x > bool 1 unless on (l) group_left (m) y": ["x", "y"],
        "histogram_quantile(0.5, sum by (le) (rate(h_bucket[$__rate_interval])))": ["h_bucket"],
        "count_values(\"v\", g) * 1e-3 + 0x1F - inf": ["g"],
        "max_over_time(x[5m:30s]) @ start() / z offset -1h": ["x", "z"],
        "sum(rate(x[5m])) without (instance)": ["x"],
        "{__name__=\"n\", job=\"j\"} # a comment naming not_me": ["n"],
        "time() - max(ts > 0) * on() group_left() (p == 1)": ["ts", "p"],
        "abs(x) atan2 y": ["x", "y"],
    }
    for expr, want in cases.items():
        got = metric_names(expr)
        expect(got == want, "names of %r == %r (got %r)" % (expr, want, got))
    expect(template_query_exprs("label_values(m{a=\"b\"}, lbl)") == ["m{a=\"b\"}"],
           "label_values(metric, label) yields the metric")
    expect(template_query_exprs("label_values(lbl)") == [], "label_values(label) yields no metric")
    expect(template_query_exprs("query_result(sum(q))") == ["sum(q)"], "query_result(expr)")
    exported = exported_names(SELF_TEST_PAGE)
    expect({"demo_step_seconds_bucket", "demo_step_seconds_sum", "demo_step_seconds_count",
            "demo_missing", "demo_samples_total"} <= exported,
           "exposition: histogram parts, TYPE-only family, counter")

    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.txt")
        rules = os.path.join(d, "rules.yml")
        with open(page, "w") as f:
            f.write(SELF_TEST_PAGE)
        with open(rules, "w") as f:
            f.write(SELF_TEST_RULES)
        got_rules = rules_exprs(rules)
        expect([w for w, _ in got_rules] == ["alert DemoStuck", "record demo:missing", "alert DemoQuoted"],
               "rules reader finds every expr with its alert/record name (got %r)" % [w for w, _ in got_rules])
        expect("group_left (name)" in got_rules[0][1] and "> 300" in got_rules[0][1],
               "rules reader keeps a block scalar whole")

        def dash_file(extra, name):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                json.dump(self_test_dashboard(extra), f)
            return p

        good = dash_file("", "good.json")
        sink = open(os.devnull, "w")
        expect(run_check(good, rules, [page], out=sink) == 0, "a correct dashboard and rules pass")

        bad = dash_file("+ sum(demo_sample_total)", "bad.json")
        unknown, _ = check(collect(bad, rules), exported)
        expect(list(unknown) == ["demo_sample_total"] and "Samples/s" in unknown["demo_sample_total"][0],
               "a misspelled name in a panel is caught with its panel title (got %r)" % unknown)
        expect(run_check(bad, rules, [page], out=sink) == 1, "... and the check exits 1")

        with open(rules, "a") as f:
            f.write("      - alert: DemoTypo\n        expr: demo_phase_typo == 1\n")
        unknown, _ = check(collect(good, rules), exported)
        expect(list(unknown) == ["demo_phase_typo"] and unknown["demo_phase_typo"] == ["alert DemoTypo"],
               "a misspelled name in a rule is caught with its alert name (got %r)" % unknown)

        with open(page, "w") as f:
            f.write(SELF_TEST_PAGE.replace("demo_step_seconds", "other_seconds"))
        unknown, _ = check(collect(good, None), exported_names(open(page).read()))
        expect(set(unknown) == {"demo_step_seconds_bucket", "demo_step_seconds_count"},
               "a histogram missing from the page is caught (got %r)" % sorted(unknown))
        sink.close()

    if failures:
        print("self-test: %d FAILED" % len(failures))
        return 1
    print("self-test: all passed")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dashboard", help="Grafana dashboard JSON")
    ap.add_argument("--rules", help="Prometheus rules YAML")
    ap.add_argument("--exported", nargs="+", metavar="FILE", help="/metrics pages (text format)")
    ap.add_argument("--write-rules", metavar="OUT", help="write the dashboard's PromQL as recording rules")
    ap.add_argument("--list", action="store_true", help="print every name used, with where")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not (a.dashboard or a.rules):
        ap.error("give --dashboard and/or --rules (or --self-test)")
    try:
        if a.write_rules:
            write_rules(dashboard_exprs(a.dashboard) if a.dashboard else [], a.write_rules)
        if a.list:
            for where, expr in collect(a.dashboard, a.rules):
                print("%s: %s" % (where, " ".join(sorted(set(metric_names(expr))))))
        if a.exported:
            return run_check(a.dashboard, a.rules, a.exported)
        if not (a.write_rules or a.list):
            ap.error("--exported FILE... is required")
        return 0
    except (OSError, ValueError) as e:  # json.JSONDecodeError and PromQLError are ValueErrors
        print("check-promql-names: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
