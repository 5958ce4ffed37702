#!/usr/bin/env bash
# Prints, one per line, the Debian/Ubuntu packages that own the shared libraries the given
# binaries load (ldd, then dpkg-query -S). The images' build stage runs it on the freshly built
# binaries and the runtime stage installs exactly that list, so the runtime image never drifts
# from what the binaries link and no package list is kept by hand.
#   - libcuda.so.1 / libnvidia-ml.so.1 may be missing: the NVIDIA container toolkit mounts the
#     driver's at run time. Any other missing library is an error.
#   - A library under /usr/local/cuda that no package owns (a toolkit installed from NVIDIA's
#     runfile, as on a developer machine) is left out with a note: the CUDA base image provides
#     it. In NVIDIA's images the toolkit is dpkg-owned and its packages are listed.
set -euo pipefail
if (($# == 0)); then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
declare -A libs=()  # resolved path -> the binary that needs it
for bin in "$@"; do
  [[ -x $bin ]] || { echo "runtime-packages: $bin is not an executable file" >&2; exit 1; }
  out=$(ldd "$bin") || { echo "runtime-packages: ldd $bin failed" >&2; exit 1; }
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then
      case $name in
        libcuda.so.* | libnvidia-ml.so.*) continue ;;
      esac
      echo "runtime-packages: $bin needs $name, which is not installed" >&2
      exit 1
    fi
    [[ $path == /* ]] && libs[$path]=$bin
  done <<<"$out"
done
# One dpkg-query call for every candidate name (merged /usr: ldd may print /lib/... where dpkg
# recorded /usr/lib/..., or a symlink's name where dpkg recorded its target).
candidates=()
for path in "${!libs[@]}"; do
  candidates+=("$path" "/usr$path" "$(readlink -f "$path")")
done
declare -A owner_of=()
while IFS= read -r line; do
  [[ $line == *": /"* ]] || continue
  owner_of[${line#*: }]=${line%%: *}
done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
declare -A pkgs=()
for path in "${!libs[@]}"; do
  owner=""
  for c in "$path" "/usr$path" "$(readlink -f "$path")"; do
    if [[ -n ${owner_of[$c]:-} ]]; then owner=${owner_of[$c]}; break; fi
  done
  if [[ -z $owner ]]; then
    if [[ $path == /usr/local/cuda* || $(readlink -f "$path") == /usr/local/cuda* ]]; then
      echo "runtime-packages: $path is not from a package: left to the CUDA base image" >&2
      continue
    fi
    echo "runtime-packages: no package owns $path (needed by ${libs[$path]})" >&2
    exit 1
  fi
  for p in ${owner//, / }; do pkgs[${p%%:*}]=1; done
done
((${#pkgs[@]})) && printf '%s\n' "${!pkgs[@]}" | LC_ALL=C sort
