#!/usr/bin/env python3
"""Renders a Helm chart like `helm template`, with Helm's own engine (no helm binary, no cluster).

    scripts/render-chart.py [--release NAME] [--namespace NS] [-f VALUES]... [--set EXPR]...
                            [--strict] [--notes] CHART

The engine is Helm v4's Go SDK, loaded as a shared library by the `helm-python-sdk` package
(scripts/requirements-deploy.txt, installed into .venv by scripts/setup.sh). Values files merge
as `helm -f a -f b` does (maps merge, later files win), then --set expressions; the chart's
values.schema.json is applied before rendering. `lookup` returns nothing, as in `helm template`,
so the chart takes its first-install path.

--strict: `helm lint --strict` first (its warnings are errors), then rendering with
missingkey=error, so a template that reads a value the chart does not define fails.
--notes: print the rendered NOTES.txt instead of the manifests.
Run it with the project's venv: .venv/bin/python scripts/render-chart.py ...
"""
import argparse
import json
import re
import sys

import yaml

try:
    import helm_python as helm
    from helm_python import _native
except ImportError:
    sys.exit("render-chart: no helm_python in this Python (scripts/setup.sh installs helm-python-sdk into .venv)")


def merge(base, over):
    """Helm's mergeMaps for -f files: maps merge key by key, anything else replaces."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("chart")
    p.add_argument("--release", default="release-name")  # helm template's default name
    p.add_argument("--namespace", default="default")
    p.add_argument("-f", "--values", action="append", default=[])
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--strict", action="store_true")
    p.add_argument("--notes", action="store_true")
    a = p.parse_args()

    values = {}
    for f in a.values:
        with open(f) as fh:
            merge(values, yaml.safe_load(fh) or {})
    for expr in a.set:
        merge(values, helm.parse_set_string(expr))

    try:
        if a.strict:
            report = helm.lint(a.chart, values, strict=True, namespace=a.namespace)
            bad = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
            if bad:
                for m in bad:
                    print(f"render-chart: lint: {m}", file=sys.stderr)
                return 1
        with helm.Chart.load(a.chart) as chart:
            # Chart.render() has no strict switch; the library's render options do ("strict":
            # Helm's Engine.Strict, missingkey=error).
            opts = {"name": a.release, "namespace": a.namespace, "is_install": True, "strict": a.strict}
            rendered = json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(opts)))
    except helm.HelmError as e:
        print(f"render-chart: {e}", file=sys.stderr)
        return 1

    if a.notes:
        notes = [v for k, v in rendered.items() if k.endswith("/NOTES.txt")]
        print(notes[0] if notes else "", end="")
        return 0
    for path in sorted(rendered):
        if path.endswith("/NOTES.txt"):
            continue
        for doc in re.split(r"(?m)^---[ \t]*$", rendered[path]):
            # A document of comments and blank lines only is no object (helm template drops it too).
            if all(not l.strip() or l.lstrip().startswith("#") for l in doc.splitlines()):
                continue
            print(f"---\n# Source: {path}\n{doc.strip(chr(10))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
