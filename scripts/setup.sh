#!/usr/bin/env bash
# Installs everything Ringmaster needs on Debian bookworm. Idempotent: when every
# package is already present it only checks and returns (a few seconds).
#
#   scripts/setup.sh            build + test dependencies
#   RINGMASTER_SETUP_PYTHON=0   skip the Python oracle environment (.venv)
#
# No host name is written here: packages come through the apt sources the machine
# already has (bookworm main carries prometheus-cpp-dev 1.0.1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libopenblas-dev libopenblas-openmp-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libyaml-cpp-dev nlohmann-json3-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev prometheus-cpp-dev
  libboost-context-dev  # cuda_emu: the CUDA emulator's fibers
  clang-format clang-tidy
  clang libclang-rt-14-dev libomp-dev  # scripts/sanitize-and-fuzz.sh: libFuzzer, sanitizers
  python3 python3-venv python3-pip python3-torch python3-numpy
  prometheus iproute2 procps curl openssl  # openssl: tests/control_plane_tls.sh makes its certificates
  # tests/deploy_*.sh: yamllint, systemd-analyze (Helm itself comes from requirements-deploy.txt)
  yamllint systemd
)
# RINGMASTER_SETUP_TESTS=0 (the container images' build stage, docker/): only what building needs.
if [[ ${RINGMASTER_SETUP_TESTS:-1} == 0 ]]; then
  build_only=()
  for p in "${APT_PACKAGES[@]}"; do
    case $p in
      clang-format | clang-tidy | clang | libclang-rt-* | libomp-dev | python3* | prometheus | yamllint | systemd) ;;
      *) build_only+=("$p") ;;
    esac
  done
  APT_PACKAGES=("${build_only[@]}")
fi

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

# Python oracle environment for tests (HF tokenizer / transformers / torch).
if [[ ${RINGMASTER_SETUP_PYTHON:-1} == 1 ]]; then
  venv="$ROOT/.venv"
  if [[ ! -x $venv/bin/python ]]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  if ! "$venv/bin/python" -c "import transformers, safetensors, torch, tensorboard" 2>/dev/null; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/scripts/requirements-test.txt"
  fi
  # Offline Kubernetes schema checks and Helm's engine (tests/deploy_*.sh); find_spec: no slow
  # import when present.
  if ! "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in
      ('kubernetes_validate', 'cloudcoil.models.prometheus_operator', 'helm_python')))" 2>/dev/null; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/scripts/requirements-deploy.txt"
  fi
fi
echo "setup: ok"
