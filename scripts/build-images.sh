#!/usr/bin/env bash
# Builds the coordinator image and the CPU agent image with podman, from a Debian base made with
# debootstrap: no registry is needed, only the Debian archive this machine's apt already uses.
#
#   scripts/build-images.sh [BUILD_DIR]      (default: build/; RINGMASTER_BINARY_DIR also works)
#   scripts/build-images.sh --run-flags      prints the `podman run` flags this machine needs
#
# Images (the names k8s/ and helm/ use; podman stores them as localhost/<name>):
#   ringmaster/coordinator:VERSION   ringmaster-coordinator and the ringmaster CLI
#   ringmaster/agent:VERSION-cpu     ringmaster-agent, ringmaster-trainer (OpenBLAS, Gloo),
#                                    ringmaster-trainer-launch and the CLI; no CUDA
# VERSION is the CMake project version of BUILD_DIR (the chart's appVersion).
#
# Steps:
#   1. The base: `debootstrap --variant=minbase` of this machine's Debian release from the
#      mirror in its apt sources, its apt sources set to the same Debian lines as the host's
#      (release, -updates, -security), documentation excluded from later installs; kept as
#      BUILD_DIR/images/base-RELEASE.tar and imported as ringmaster/base:RELEASE. Made once:
#      delete the tarball (or set RINGMASTER_IMAGES_REBASE=1) to make it again.
#   2. Per image, the packages owning the shared libraries the binaries load
#      (docker/runtime-packages.sh: ldd, then dpkg -S on this machine), installed FROM the base.
#   3. The binaries, stripped copies, a non-root user (ringmaster, uid/gid 10001, as the
#      manifests' securityContext expects), the entrypoints the manifests expect.
#
# The binaries must come from a build on the same Debian release (the packages are looked up
# here and installed there), and the agent image is CPU-only: an agent or trainer linking the
# CUDA runtime is refused (configure with -DRINGMASTER_CUDA=OFF). A build with
# RINGMASTER_NATIVE=ON (the default) runs only on CPUs like this one's: a warning says so.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "build-images: $*" >&2; exit 1; }
note() { echo "build-images: $*" >&2; }

# podman run flags: rootful podman raises the container's RLIMIT_NOFILE/NPROC to its own
# defaults (1048576 and more), which a machine that is itself a container may not allow
# ("error setting rlimit type 7: operation not permitted"). Tries no flags; then, one limit at a
# time (the other at 1024), the host's hard limit halved until a container starts; prints the
# flags that worked.
run_flags() {
  local image=$1 nofile nproc
  starts() { podman run --rm --network none --ulimit "nofile=$1:$1" --ulimit "nproc=$2:$2" "$image" true >/dev/null 2>&1; }
  if podman run --rm --network none "$image" true >/dev/null 2>&1; then
    return 0
  fi
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [[ $nofile == unlimited ]] && nofile=1048576
  [[ $nproc == unlimited ]] && nproc=4194304
  until starts "$nofile" 1024; do
    ((nofile > 1024)) || { podman run --rm --network none "$image" true >&2 || true; die "no container starts here (the error above), even with low ulimits"; }
    nofile=$((nofile / 2 > 1024 ? nofile / 2 : 1024))
  done
  until starts "$nofile" "$nproc"; do
    ((nproc > 1024)) || die "no container starts with nofile=$nofile"
    nproc=$((nproc / 2 > 1024 ? nproc / 2 : 1024))
  done
  echo "--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
}

# This machine's Debian release and the apt lines of its Debian archives, "URI SUITE COMPONENTS",
# from /etc/apt/sources.list, *.list and *.sources (deb822) in sources.list.d: the files apt reads
# (others, such as *.disabled, it ignores). Only suites of this release: third-party repositories
# stay out of the images.
host_release() {
  # shellcheck disable=SC1091
  (. /etc/os-release && [[ ${ID:-} == debian && -n ${VERSION_CODENAME:-} ]] && echo "$VERSION_CODENAME") ||
    die "this machine is not Debian (/etc/os-release): the images are built from its Debian release"
}
host_debian_sources() {
  local release=$1 f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    # deb [options] URI SUITE COMPONENT...
    awk -v rel="$release" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
        if ($(i + 1) != rel && index($(i + 1), rel "-") != 1) next
        line = $i " " $(i + 1)
        for (j = i + 2; j <= NF && $j !~ /^#/; j++) line = line " " $j
        print line
      }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    # deb822 stanzas, separated by blank lines; "Enabled: no" turns one off.
    awk -v rel="$release" '
      function flush(   n, u, s, k, l, uris, suites) {
        if (types ~ /(^| )deb( |$)/ && enabled != "no") {
          n = split(uri, uris, " "); k = split(suite, suites, " ")
          for (u = 1; u <= n; u++) for (l = 1; l <= k; l++)
            if (suites[l] == rel || index(suites[l], rel "-") == 1) print uris[u] " " suites[l] " " comps
        }
        types = uri = suite = comps = enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); $1 = ""; sub(/^ +/, ""); val = $0 }
      key == "types:" { types = val } key == "uris:" { uri = val } key == "suites:" { suite = val }
      key == "components:" { comps = val } key == "enabled:" { enabled = tolower(val) }
      END { flush() }' "$f"
  done
}

# --- arguments
if [[ ${1:-} == --run-flags ]]; then
  command -v podman >/dev/null || die "podman is not installed"
  base=$(podman images --format '{{.Repository}}:{{.Tag}}' | grep -m1 '/ringmaster/base:' || true)
  [[ -n $base ]] || die "no ringmaster/base image: run $0 first"
  run_flags "$base"
  exit 0
fi
BUILD=$(cd "${1:-${RINGMASTER_BINARY_DIR:-$ROOT/build}}" && pwd) || die "no build directory"
for tool in podman debootstrap dpkg-query ldd strip; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install podman debootstrap binutils)"
done
((EUID == 0)) || die "debootstrap and rootful podman need root"

coord_bin=$BUILD/coordinator/ringmaster-coordinator
agent_bin=$BUILD/agent/ringmaster-agent
cli_bin=$BUILD/cli/ringmaster
trainer_bin=$BUILD/trainer/ringmaster-trainer
for b in "$coord_bin" "$agent_bin" "$cli_bin" "$trainer_bin"; do
  [[ -x $b ]] || die "$b is not built (ninja -C $BUILD ringmaster-coordinator ringmaster-agent ringmaster ringmaster-trainer)"
done
for b in "$agent_bin" "$trainer_bin"; do
  if grep -qE 'lib(cudart|cublas|nccl|cuda)\.so' <<<"$(ldd "$b")"; then
    die "$b links the CUDA runtime; the CPU agent image needs a build configured with -DRINGMASTER_CUDA=OFF"
  fi
done
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
[[ -n $version ]] || die "no CMAKE_PROJECT_VERSION in $BUILD/CMakeCache.txt"
if grep -q '^RINGMASTER_NATIVE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  note "warning: $BUILD is built with -march=native (RINGMASTER_NATIVE=ON): these images run only on CPUs with this one's instruction set"
fi

release=$(host_release)
sources=$(host_debian_sources "$release" | awk '!seen[$0]++')
mirror=$(awk -v rel="$release" '$2 == rel {print $1; exit}' <<<"$sources")
[[ -n $mirror ]] || die "no apt source for suite $release in /etc/apt/sources.list*: nothing to debootstrap from"

cache=$BUILD/images
mkdir -p "$cache"
base_tar=$cache/base-$release.tar
base_image=ringmaster/base:$release
start=$SECONDS

# --- 1. the base
if [[ ${RINGMASTER_IMAGES_REBASE:-0} == 1 ]]; then rm -f "$base_tar"; fi
if [[ ! -f $base_tar ]]; then
  rootfs=$cache/rootfs-$release
  rm -rf "$rootfs"
  note "debootstrap --variant=minbase $release from $mirror (a few minutes)"
  debootstrap --variant=minbase "$release" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
  # The host's Debian lines, so the runtime packages come in the versions the binaries were
  # linked against (-updates, -security).
  awk '{print "deb " $0}' <<<"$sources" >"$rootfs/etc/apt/sources.list"
  # As Debian's slim images do: no documentation, manual pages or translations from later
  # installs (copyright files stay).
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/01-ringmaster-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    >"$rootfs/etc/apt/apt.conf.d/01-ringmaster-norecommends"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/info/*
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$rootfs"
fi
old_base=""
if ! podman image exists "$base_image" || [[ $base_tar -nt $cache/base-imported ]]; then
  # The base this one replaces is removed once the images no longer build on it (below).
  old_base=$(podman image inspect --format '{{.Id}}' "$base_image" 2>/dev/null || true)
  podman import -q --change 'CMD ["/bin/bash"]' "$base_tar" "$base_image" >/dev/null
  touch "$cache/base-imported"
fi
note "base $base_image ready ($((SECONDS - start)) s)"

# --- 2 and 3. the images
# build_image TAG CONTAINERFILE_TAIL BINARY...: context under $cache with bin/ (stripped
# copies), packages.txt (runtime-packages.sh on the unstripped binaries) and extra_files
# (SOURCE:NAME, copied to the context's top, executable).
extra_files=()
# binaries_id BINARY...: a digest of the unstripped binaries (the label the test compares).
binaries_id() { cat "$@" | sha256sum | cut -c1-16; }
build_image() {
  local tag=$1 tail=$2 ctx
  shift 2
  ctx=$cache/context-${tag//[\/:]/-}
  rm -rf "$ctx"
  mkdir -p "$ctx/bin"
  "$ROOT/docker/runtime-packages.sh" "$@" >"$ctx/packages.txt" ||
    die "runtime-packages.sh failed for $tag"
  local b
  for b in "$@"; do strip --strip-unneeded -o "$ctx/bin/$(basename "$b")" "$b"; done
  for b in "${extra_files[@]}"; do install -m 0755 "${b%%:*}" "$ctx/${b#*:}"; done
  extra_files=()
  # Which build the image holds: tests/deploy_images.sh runs only images of the build under test.
  local built_from
  built_from=$(binaries_id "$@")
  cat >"$ctx/Containerfile" <<EOF
FROM $base_image
LABEL org.ringmaster.binaries=$built_from
COPY packages.txt /tmp/packages.txt
RUN apt-get update \\
 && xargs -a /tmp/packages.txt apt-get install -y --no-install-recommends \\
 && apt-get clean \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /tmp/packages.txt \\
 && groupadd --system --gid 10001 ringmaster \\
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ringmaster --create-home \\
      --shell /usr/sbin/nologin ringmaster
COPY bin/ /usr/local/bin/
$tail
EOF
  note "building $tag: $(wc -l <"$ctx/packages.txt") runtime packages"
  local old
  old=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  podman build --layers=false -t "$tag" -f "$ctx/Containerfile" "$ctx" >"$ctx/build.log" 2>&1 ||
    { tail -n 30 "$ctx/build.log" >&2; die "podman build of $tag failed (log: $ctx/build.log)"; }
  # The image this one replaces, now untagged (kept if a container still uses it).
  if [[ -n $old && $old != $(podman image inspect --format '{{.Id}}' "$tag") ]]; then
    podman rmi "$old" >/dev/null 2>&1 || true
  fi
}

coord_tag=ringmaster/coordinator:$version
agent_tag=ringmaster/agent:$version-cpu

# Coordinator: the same user, ports, volume and default command as docker/coordinator.Dockerfile
# (TLS material and tokens mounted at /etc/ringmaster/credentials, as k8s/ and helm/ do).
build_image "$coord_tag" "$(cat <<'EOF'
USER 10001:10001
WORKDIR /var/lib/ringmaster
VOLUME ["/var/lib/ringmaster"]
EXPOSE 7070 9400
ENTRYPOINT ["/usr/local/bin/ringmaster-coordinator"]
CMD ["--listen", "0.0.0.0:7070", "--db", "/var/lib/ringmaster/jobs.db", \
     "--metrics-listen", "0.0.0.0:9400", "--metrics-insecure-public", \
     "--tls-cert", "/etc/ringmaster/credentials/tls.crt", \
     "--tls-key", "/etc/ringmaster/credentials/tls.key", \
     "--tls-client-ca", "/etc/ringmaster/credentials/ca.crt", \
     "--join-token-file", "/etc/ringmaster/credentials/join-token", \
     "--submit-token-file", "/etc/ringmaster/credentials/submit-token"]
EOF
)" "$coord_bin" "$cli_bin"

# CPU agent: as the CUDA agent images (docker/agent-cuda13.Dockerfile) without CUDA; k8s/ and
# helm/ pass the agent's flags (--trainer=/usr/local/bin/ringmaster-trainer-launch,
# --work-dir=/var/lib/ringmaster/agent, TLS from /etc/ringmaster/credentials) and mount /shared.
extra_files=("$ROOT/scripts/trainer-launch.sh:ringmaster-trainer-launch")
build_image "$agent_tag" "$(cat <<'EOF'
COPY ringmaster-trainer-launch /usr/local/bin/
RUN mkdir -p /etc/ringmaster /shared \
 && touch /etc/ringmaster/trainer.env \
 && chown 10001:10001 /shared
ENV HOME=/var/lib/ringmaster
USER 10001:10001
WORKDIR /var/lib/ringmaster
# /metrics with --metrics-listen=0.0.0.0:9401: the agent's series and its ranks' figures.
EXPOSE 9401
ENTRYPOINT ["/usr/local/bin/ringmaster-agent"]
CMD ["--help"]
EOF
)" "$agent_bin" "$trainer_bin" "$cli_bin"

[[ -n $old_base ]] && { podman rmi "$old_base" >/dev/null 2>&1 || true; }
for tag in "$coord_tag" "$agent_tag"; do
  note "$tag: $(podman image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
done
note "done in $((SECONDS - start)) s"
