#!/usr/bin/env bash
# ctest-labels: unit
# The metric names in the docs against the code, statically (no process started): every
# ringmaster_* metric docs/metrics.md names is a family the code registers, every family the
# code registers is in docs/metrics.md, and tests/lib/metric_catalogue.prom (what the dashboard
# and alert rules are checked against) lists exactly the registered families. The registered
# families are the quoted "ringmaster_…" names in the non-test sources of agent/, coordinator/
# and common/ (the three places /metrics pages are built), less the label ringmaster_job. The
# other docs (and README.md) may name build targets too (architecture.md): there a name must be
# a registered family, a word of some CMakeLists.txt, or a key the trainer writes into a file
# (a quoted "ringmaster_…" in trainer/'s non-test sources: final/tokenizer_config.json's
# ringmaster_tokenizer_compat); `ringmaster_cuda_*` patterns are skipped.
# tests/metrics_prometheus_cluster.sh checks the live pages against the dashboard.
set -euo pipefail
src=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$src/docs/metrics.md
catalogue=$src/tests/lib/metric_catalogue.prom
labels='^ringmaster_job$'  # a label name shaped like a metric name

code=$(grep -rhoE --include='*.cc' --include='*.h' --exclude='*_test.cc' \
  '"ringmaster_[a-z0-9_]+"' "$src/agent" "$src/coordinator" "$src/common" |
  tr -d '"' | grep -vE "$labels" | sort -u)
documented=$(grep -oE 'ringmaster_[a-z0-9_]*[a-z0-9]' "$doc" | grep -vE "$labels" | sort -u)
listed=$(grep -oE '^# TYPE ringmaster_[a-z0-9_]+' "$catalogue" | awk '{print $3}' | sort -u)

n_code=$(wc -l <<<"$code")
n_doc=$(wc -l <<<"$documented")
# A grep that found nothing would pass every check below: demand the catalogue's size.
if ((n_code < 40 || n_doc < 40)); then
  echo "FAIL: found only $n_code families in the code and $n_doc names in $doc"
  exit 1
fi

registered() {
  grep -qxF "$1" <<<"$code" && return 0
  # A histogram's series: x_bucket, x_sum, x_count of a registered x.
  local base
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$1")
  [[ $base != "$1" ]] && grep -qxF "$base" <<<"$code"
}
fail=0
while read -r name; do
  registered "$name" && continue
  echo "FAIL: docs/metrics.md names $name, which no /metrics page registers" \
    "(grep agent/ coordinator/ common/)"
  fail=1
done <<<"$documented"
targets=$(find "$src" -name CMakeLists.txt -not -path "$src/build*" -exec cat {} + |
  grep -oE 'ringmaster_[a-z0-9_]+' | sort -u)
file_keys=$(grep -rhoE --include='*.cc' --include='*.h' --exclude='*_test.cc' \
  '"ringmaster_[a-z0-9_]+"' "$src/trainer" | tr -d '"' | sort -u)
for f in "$src"/docs/*.md "$src/README.md"; do
  [[ $f == "$doc" ]] && continue
  # Names, and patterns ending in * or _ and file names (ringmaster_data.json) (skipped).
  for name in $(grep -oE 'ringmaster_[a-z0-9_]*(\*|\.[a-z]+)?' "$f" | sort -u); do
    [[ $name == *'*' || $name == *_ || $name == *.* || $name =~ $labels ]] && continue
    registered "$name" || grep -qxF "$name" <<<"$targets" || grep -qxF "$name" <<<"$file_keys" ||
      { echo "FAIL: ${f#"$src"/} names $name, neither a registered metric, a build target nor a file key"; fail=1; }
  done
done
while read -r name; do
  grep -qxF "$name" <<<"$documented" ||
    { echo "FAIL: $name is registered in the code but not in docs/metrics.md"; fail=1; }
done <<<"$code"
if ! diff <(echo "$code") <(echo "$listed") >/dev/null; then
  echo "FAIL: tests/lib/metric_catalogue.prom differs from the registered families" \
    "(< code only, > catalogue only):"
  diff <(echo "$code") <(echo "$listed") | grep '^[<>]' || true
  fail=1
fi
((fail == 0)) && echo "ok: $n_code families registered, all in docs/metrics.md and the catalogue;" \
  "$n_doc names in docs/metrics.md, all registered; the other docs name only registered ones"
exit $fail
