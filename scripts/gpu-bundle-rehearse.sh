#!/usr/bin/env bash
# Start-up rehearsal of the GPU check's bundle on an older distribution (issue #29): does the
# bundle that `scripts/gpu-check.sh --prepare` built here (Debian 12, glibc 2.36) start inside a
# Debian bullseye root (glibc 2.31), where the GPU image's distribution is unknown?
#
#   scripts/gpu-bundle-rehearse.sh [--bundle gpu-bundle] [--root DIR] [--suite bullseye]
#
# Needs root (chroot) and debootstrap (`apt-get install debootstrap`). The root is made once with
# `debootstrap --variant=minbase` (plus python3, the check's own language) from the
# Debian mirror this machine's apt sources already use (read from /etc/apt/sources.list* at run
# time; the first that serves the suite) and cached in build-rehearse/<suite> (ignored). Inside
# it, as on a GPU image: the CUDA libraries the bundle leaves to the image (libcublasLt,
# libcublas, libnccl) are copied from this machine's toolkit into /usr/local/cuda/lib64; there is
# no driver and no GPU. It then checks, through the same code the GPU run uses
# (scripts/gpu_check_run.py's preflight):
#   1. with the image's own glibc the binaries do NOT load (shown, the reason printed), and
#   2. the preflight picks the carried glibc's loader, every binary starts (ringmaster-trainer
#      --version, each gtest binary --gtest_list_tests), and the tests stage runs: each gpu test
#      exits 77 (no device) and is reported as a skip, since the root has no GPU.
# Prints PASS/FAIL and the figures; takes ~2 min once the root is cached (debootstrap: ~5 min).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bundle=gpu-bundle
suite=bullseye
rootfs=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --bundle) bundle=$2; shift ;;
    --root) rootfs=$2; shift ;;
    --suite) suite=$2; shift ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu-bundle-rehearse: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
rootfs=${rootfs:-$ROOT/build-rehearse/$suite}
[[ -f $bundle/bundle.tgz ]] || { echo "gpu-bundle-rehearse: no $bundle/bundle.tgz (run scripts/gpu-check.sh --prepare)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "gpu-bundle-rehearse: needs root (chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "gpu-bundle-rehearse: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

# Debian mirrors named by this machine's apt sources (deb822 URIs:, one-line deb entries, and
# URLs noted in their comments), security archives left out; the uncommented ones first.
apt_mirrors() {
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  { cat "${files[@]}" 2>/dev/null | grep -v '^[[:space:]]*#' || true
    cat "${files[@]}" 2>/dev/null | grep '^[[:space:]]*#' || true; } |
    grep -oE 'https?://[^ ]+' | grep -v -- '-security' |
    grep -E '/debian/?$|/debian/[0-9]{8}T[0-9]{6}Z/?$' | sed 's:/$::' | awk '!seen[$0]++'
}

serves() {  # serves MIRROR: does it have dists/$suite/Release?
  python3 - "$1/dists/$suite/Release" <<'EOF'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=15).read(64)
except Exception:
    sys.exit(1)
EOF
}

t0=$(date +%s)
if [[ ! -f $rootfs/etc/debian_version ]]; then
  mirror=""
  while read -r m; do
    if serves "$m"; then mirror=$m; break; fi
    echo "gpu-bundle-rehearse: $m does not serve $suite; trying the next" >&2
  done < <(apt_mirrors)
  [[ -n $mirror ]] || { echo "gpu-bundle-rehearse: no mirror in /etc/apt/sources.list* serves $suite" >&2; exit 1; }
  echo "gpu-bundle-rehearse: debootstrap $suite from $mirror into $rootfs (once; cached)"
  rm -rf "$rootfs.tmp"
  mkdir -p "$(dirname "$rootfs")"
  debootstrap --variant=minbase --include=python3 "$suite" "$rootfs.tmp" "$mirror" \
    >"$(dirname "$rootfs")/debootstrap-$suite.log" 2>&1 ||
    { tail -20 "$(dirname "$rootfs")/debootstrap-$suite.log" >&2; exit 1; }
  mv "$rootfs.tmp" "$rootfs"
fi
if ! chroot "$rootfs" python3 -c 'import json' 2>/dev/null; then
  echo "gpu-bundle-rehearse: installing python3 into the root"
  chroot "$rootfs" apt-get install -y --no-install-recommends python3 >/dev/null
fi
t_root=$(($(date +%s) - t0))

# The image's toolkit: the CUDA libraries the bundle does not carry.
mkdir -p "$rootfs/usr/local/cuda/lib64"
for so in libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
  src=$(ldconfig -p | awk -v s="$so" '$1 == s && !f {f = $NF} END {print f}')
  [[ -n $src ]] || src=$(ls /usr/local/cuda/lib64/$so /usr/local/cuda*/lib*/$so 2>/dev/null | head -1)
  [[ -n $src ]] || { echo "gpu-bundle-rehearse: $so not found on this machine" >&2; exit 1; }
  [[ -f $rootfs/usr/local/cuda/lib64/$so ]] || cp -L "$src" "$rootfs/usr/local/cuda/lib64/$so"
done

# The bundle and the check's scripts, as the device tool would carry them.
work=/opt/gpu-check
rm -rf "$rootfs$work"
mkdir -p "$rootfs$work/repo/scripts" "$rootfs$work/repo/tests" "$rootfs$work/out"
cp scripts/gpu_check_*.py scripts/gpu_bench_torch.py "$rootfs$work/repo/scripts/"
cp "$bundle/bundle.tgz" "$rootfs$work/"
mkdir -p "$rootfs$work/bundle"
tar -C "$rootfs$work/bundle" -xzf "$bundle/bundle.tgz"
mountpoint -q "$rootfs/proc" || mount -t proc proc "$rootfs/proc"
trap 'umount "$rootfs/proc" 2>/dev/null || true' EXIT

glibc=$(chroot "$rootfs" /usr/bin/ldd --version | sed -n 1p)
os=$(grep PRETTY_NAME "$rootfs/etc/os-release" | cut -d= -f2 | tr -d '"')
echo "gpu-bundle-rehearse: root $os ($glibc), made/reused in ${t_root}s"

fail=0
# 1. The image's own loader: expected to refuse (glibc 2.31 < what Debian 12's libraries ask).
own=$(chroot "$rootfs" env LD_LIBRARY_PATH=$work/bundle/lib:/usr/local/cuda/lib64 \
  $work/bundle/bin/ringmaster-trainer --version 2>&1 | head -3 || true)
echo "gpu-bundle-rehearse: with the image's glibc: ${own:-<no output>}"

# 2. The check's own preflight and tests stage (no GPU here: every gpu test must exit 77).
t1=$(date +%s)
rc=0
chroot "$rootfs" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root python3 $work/repo/scripts/gpu_check_run.py --bundle $work/bundle \
  --out $work/out --repo $work/repo --stages tests --budget 300 >"$rootfs$work/run.txt" 2>&1 || rc=$?
t_run=$(($(date +%s) - t1))
sed -n '1,400p' "$rootfs$work/run.txt" | grep -E 'preflight: (glibc|every|libraries)|FAIL|==|: (pass|skipped|fail|timeout)' |
  cut -c1-400
python3 - "$rootfs$work/out/gpu-check.json" <<'EOF' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
env = r.get("env", {})
rows = r["stages"]["tests"].get("tests", [])
bad = [t for t in rows if t.get("status") != "skipped (77: no device)"]
print(f"gpu-bundle-rehearse: carried glibc used: {env.get('carried_glibc_used')}; "
      f"setup error: {r.get('setup_error')}; {len(rows)} gpu tests, "
      f"{len(rows) - len(bad)} exit 77 (no device) as expected"
      + (f"; unexpected: {[(t['name'], t.get('status')) for t in bad]}" if bad else ""))
if r.get("setup_error") or not env.get("carried_glibc_used") or bad or not rows:
    sys.exit(1)
EOF
if [[ $fail == 0 ]]; then
  echo "gpu-bundle-rehearse: PASS: the bundle starts on $os ($glibc); check run ${t_run}s"
else
  echo "gpu-bundle-rehearse: FAIL (exit $rc): see $rootfs$work/run.txt" >&2
  exit 1
fi
