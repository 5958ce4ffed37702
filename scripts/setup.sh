#!/usr/bin/env bash
# Installs everything Ringmaster needs on Debian bookworm. Idempotent: when every
# package is already present it only checks and returns (a few seconds).
#
#   scripts/setup.sh            build + test dependencies
#   RINGMASTER_SETUP_PYTHON=0   skip the Python oracle environment (.venv)
#
# No host name is written here: apt sources are taken from the ones the machine
# already has; prometheus-cpp (not in bookworm) comes from the same archive's
# trixie suite, pinned so that nothing else is pulled from it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libopenblas-dev libopenblas-openmp-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libyaml-cpp-dev nlohmann-json3-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  clang-format clang-tidy
  python3 python3-venv python3-pip python3-torch python3-numpy
  prometheus iproute2 procps
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# prometheus-cpp from trixie, by suite name, through the archive URIs already
# configured for bookworm.
if ! dpkg-query -W -f='${Status}' prometheus-cpp-dev 2>/dev/null | grep -q "install ok installed"; then
  src=/etc/apt/sources.list.d/ringmaster-trixie.sources
  if [[ ! -f $src ]]; then
    uris=""
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
      uris=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [[ -z $uris && -f /etc/apt/sources.list ]]; then
      uris=$(awk '$1=="deb" && $0 ~ /bookworm/ && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^(https?|file|mirror):/) {print $i; exit}}' /etc/apt/sources.list)
    fi
    if [[ -z $uris ]]; then
      echo "setup: cannot find the Debian archive URI in /etc/apt/sources.list(.d)" >&2
      exit 1
    fi
    printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uris" |
      $SUDO tee "$src" >/dev/null
    printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' |
      $SUDO tee /etc/apt/preferences.d/ringmaster-trixie >/dev/null
  fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t trixie prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
fi

# Python oracle environment for tests (HF tokenizer / transformers / torch).
if [[ ${RINGMASTER_SETUP_PYTHON:-1} == 1 ]]; then
  venv="$ROOT/.venv"
  if [[ ! -x $venv/bin/python ]]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  if ! "$venv/bin/python" -c "import transformers, safetensors, torch" 2>/dev/null; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/scripts/requirements-test.txt"
  fi
fi
echo "setup: ok"
