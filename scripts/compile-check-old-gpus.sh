#!/usr/bin/env bash
# Compile-checks the CUDA kernels (trainer/cuda/kernels/*.cu, not the emulator's cuda_emu/) for the older GPUs
# that CUDA 13 no longer targets: sm_61 (Tesla P40) and sm_70 (V100). CUDA 11.8 is the toolkit
# the P40/V100 image uses: Debian bookworm's nvidia-cuda-toolkit from the non-free component.
# Not part of CI (the install downloads 1.6 GB and takes 5.5 GB of disk); run it by hand after changing a kernel:
#
#   sudo scripts/compile-check-old-gpus.sh            # apt: adds non-free, installs the toolkit
#   scripts/compile-check-old-gpus.sh --no-install    # the toolkit is already there
#
# Each kernel is compiled by CUDA 11.8's nvcc for sm_61 and sm_70; the CUDA engine's host C++
# (trainer/cuda/**/*.cc) gets a syntax check against the same toolkit's headers. It prints OK or FAIL
# per file and architecture (with the first error lines) and exits non-zero when any check fails.
# Object files go to a temporary directory that is removed at the end.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
install=1
for arg in "$@"; do
  case "$arg" in
    --no-install) install=0 ;;
    -h | --help)
      sed -n '2,13p' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "compile-check-old-gpus: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done

# The toolkit's nvcc is /usr/bin/nvcc; /usr/local/cuda/bin (CUDA 13) may come first in PATH.
nvcc=/usr/bin/nvcc
# The extra sources file: the machine's own Debian sources (same URIs, suites and keys) with the
# components the toolkit lives in. Derived rather than written out so that it follows whatever
# mirror or snapshot the machine already uses.
nonfree_sources=/etc/apt/sources.list.d/ringmaster-old-gpus.sources
nonfree_components="contrib non-free non-free-firmware"

derive_nonfree_sources() {
  local deb822=/etc/apt/sources.list.d/debian.sources legacy=/etc/apt/sources.list
  if [[ -f "$deb822" ]]; then
    sed -E "s/^Components:.*/Components: ${nonfree_components}/" "$deb822"
  elif [[ -f "$legacy" ]] && grep -qE '^deb[[:space:]]' "$legacy"; then
    # One-line format: deb [options] URI suite components... -> same URI and suite, deb822.
    awk -v comps="$nonfree_components" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        printf "Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\n", $i, $(i + 1), comps
        printf "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
      }' "$legacy"
  else
    echo "compile-check-old-gpus: no Debian apt sources found ($deb822 or $legacy)" >&2
    return 1
  fi
}

install_toolkit() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "compile-check-old-gpus: installing the toolkit needs root (or pass --no-install)" >&2
    exit 2
  fi
  local codename
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [[ "$codename" != bookworm ]]; then
    echo "compile-check-old-gpus: this is Debian '$codename'; CUDA 11.8 is bookworm's" \
      "nvidia-cuda-toolkit" >&2
    exit 2
  fi
  derive_nonfree_sources >"$nonfree_sources.new"
  mv "$nonfree_sources.new" "$nonfree_sources"
  echo "== apt sources for contrib/non-free: $nonfree_sources"
  apt-get update -q
  # CUDA 11.8 accepts GCC <= 11; bookworm's default is 12. nvidia-cuda-toolkit alone may be
  # satisfied by clang; nvidia-cuda-toolkit-gcc requires g++-11 and names it cuda-g++, the host
  # compiler passed below. No recommends: the profilers, nsight and docs are gigabytes the
  # compile does not need.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    nvidia-cuda-toolkit nvidia-cuda-toolkit-gcc
}

if [[ $install -eq 1 ]]; then
  install_toolkit
fi

if ! "$nvcc" --version 2>/dev/null | grep -q 'release 11\.8'; then
  echo "compile-check-old-gpus: $nvcc is not CUDA 11.8 (run without --no-install)" >&2
  exit 2
fi
host_cxx=/usr/bin/cuda-g++
[[ -x "$host_cxx" ]] || host_cxx=/usr/bin/g++-11

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The toolkit's helpers (ptxas, fatbinary, cudafe++) are in /usr/bin; a newer toolkit's bin
# directory earlier in PATH would hand sm_61 to CUDA 13's ptxas, which rejects it.
export PATH="/usr/bin:$PATH"
# The toolkit's headers are in /usr/include, which GCC searches after /usr/local/include; a
# machine with another toolkit's headers there (CUDA 13 links them in on the build machines)
# would shadow them. An -isystem directory of links to the packages' own headers comes first.
overlay="$work/include"
mkdir -p "$overlay"
for pkg in nvidia-cuda-dev libcub-dev libthrust-dev libcu++-dev; do
  dpkg -L "$pkg" | grep -E '^/usr/include/[^/]+$' | while read -r entry; do
    ln -sfn "$entry" "$overlay/$(basename "$entry")"
  done
done

# check LABEL OUTPUT COMMAND...: runs COMMAND (which writes OUTPUT and the dependency list
# OUTPUT.d) in the repo root and prints OK or FAIL with the first error lines.
failures=0
checks=0
check() {
  local label=$1 out=$2 start=$SECONDS foreign warnings
  shift 2
  checks=$((checks + 1))
  if ! (cd "$repo" && "$@") >"$out.log" 2>&1; then
    echo "FAIL $label"
    grep -m 8 -E 'error|fatal' "$out.log" | sed 's/^/    /' || head -8 "$out.log" | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  # A header from /usr/local (another toolkit) means this did not check CUDA 11.8's.
  if foreign=$(tr -s ' \134' '\n' <"$out.d" | grep -E '^/usr/local/'); then
    echo "FAIL $label  (used headers outside CUDA 11.8:)"
    echo "$foreign" | head -5 | sed 's/^/    /'
    failures=$((failures + 1))
    return
  fi
  warnings=$(grep -c -i 'warning' "$out.log" || true)
  echo "OK   $label  ($((SECONDS - start)) s, $warnings warning lines)"
  grep -m 4 -i 'warning' "$out.log" | sed 's/^/    /' || true
}

# The kernels, as the project's CUDA build compiles them (CMAKE_CUDA_STANDARD 17, Release, the
# repo root as the include path; Abseil comes from /usr/include), for each old architecture's
# real code.
nvcc_flags=(-ccbin "$host_cxx" -std=c++17 -O3 -DNDEBUG -isystem "$overlay" -I"$repo")
arches=(61 70)
kernels=()
for src in "$repo"/trainer/cuda/kernels/*.cu; do kernels+=("${src#"$repo"/}"); done
echo "== $("$nvcc" --version | tail -1), host $("$host_cxx" --version | head -1)"
echo "== nvcc: ${#kernels[@]} files x sm_${arches[*]}"
for src in "${kernels[@]}"; do
  for arch in "${arches[@]}"; do
    out="$work/$(basename "$src" .cu).sm_$arch.o"
    check "$(printf '%-36s sm_%s' "$src" "$arch")" "$out" "$nvcc" "${nvcc_flags[@]}" \
      -gencode "arch=compute_$arch,code=sm_$arch" -MD -MF "$out.d" -c "$src" -o "$out"
  done
done

# The CUDA engine's host C++ (cuBLASLt GEMMs, the model, the engine) is built by the project's
# C++ compiler as C++20 against the same toolkit's headers: a syntax check against CUDA 11.8's
# runtime and cuBLASLt declarations.
cxx=${CXX:-g++}
host_sources=()
for src in "$repo"/trainer/cuda/*.cc "$repo"/trainer/cuda/{kernels,model,parallel,engine}/*.cc; do
  [[ "$src" == *_test.cc ]] || host_sources+=("${src#"$repo"/}")
done
echo "== $cxx -std=c++20 -fsyntax-only: ${#host_sources[@]} files ($("$cxx" --version | head -1))"
for src in "${host_sources[@]}"; do
  out="$work/$(basename "$src" .cc).host"
  check "$(printf '%-36s host' "$src")" "$out" "$cxx" -std=c++20 -fsyntax-only \
    -isystem "$overlay" -I"$repo" -MD -MF "$out.d" "$src"
done

if [[ $failures -ne 0 ]]; then
  echo "== $failures of $checks checks failed"
  exit 1
fi
echo "== all $checks checks OK"
