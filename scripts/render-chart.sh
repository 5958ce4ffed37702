#!/usr/bin/env bash
# Renders the Helm chart like `helm template` without a helm binary: builds tools/helm-render
# (Go, GOPATH mode, against the Go libraries Debian ships — scripts/setup.sh installs them) into
# a cache folder once, then runs it with the arguments given.
#
#   scripts/render-chart.sh [--release NAME] [--namespace NS] [-f VALUES]... [--strict] [--notes] helm/ringmaster
#
# See docs/operations.md, "How the chart is rendered in tests", for why and how faithfully.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v go >/dev/null || { echo "render-chart: go not found (scripts/setup.sh installs golang-go)" >&2; exit 127; }
cache=${RINGMASTER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ringmaster}
bin=$cache/helm-render
src=$ROOT/tools/helm-render/main.go
if [[ ! -x $bin || $src -nt $bin ]]; then
  # GOPATH mode: imports resolve in Debian's /usr/share/gocode (golang-*-dev packages), nothing
  # is downloaded. The source is copied into a GOPATH of its own so that ".../v3" import paths
  # resolve as in Debian's packages (Go's minimal module compatibility applies inside GOPATH).
  # -p 1: the build machines have two shared cores.
  pkg=$cache/gopath/src/ringmaster/helm-render
  mkdir -p "$pkg"
  cp "$src" "$pkg/main.go"
  printf 'module ringmaster/helm-render\n' >"$pkg/go.mod"  # enables the /vN rule
  GO111MODULE=off GOPATH="$cache/gopath:/usr/share/gocode" GOFLAGS= GOCACHE="$cache/go-build" \
    go build -p 1 -o "$bin.tmp" ringmaster/helm-render
  mv "$bin.tmp" "$bin"
fi
exec "$bin" "$@"
