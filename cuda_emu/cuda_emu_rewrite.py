#!/usr/bin/env python3
"""Rewrites what a host C++ compiler cannot parse in a CUDA source, for the emulator build.

  k<<<grid, block[, shared[, stream]]>>>(args)  ->  ::cuda_emu::Launch("k", k, grid, block, ...)(args)
  extern __shared__ T name[];                   ->  T* name = reinterpret_cast<T*>(::cuda_emu::DynamicShared());
  __shared__ T name[N]...;                      ->  T (&name)[N]... bound to a per-thread heap copy
                                                    (::cuda_emu::StaticShared, 8 bytes of TLS), then
                                                    ::cuda_emu::RegisterShared(&name, sizeof name)
                                                    (the race detector learns the variable's extent)

Line numbers are kept (#line and no added newlines), so compiler errors, sanitizer reports and
the emulator's own reports point at the .cu file.
Usage: cuda_emu_rewrite.py IN.cu OUT.cc
"""
import re
import sys

src_path, out_path = sys.argv[1], sys.argv[2]
with open(src_path) as f:
    src = f.read()

# Kernel name: an identifier, optionally qualified, optionally with one level of template args.
LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>", re.S)
DYNAMIC = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>\s\*]+?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC = re.compile(
    r"(?<!extern )__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>\s\*]+?)\s+(\w+)\s*((?:\[[^\];]*\]\s*)*);")


def launch(m):
    name, cfg = m.group(1), m.group(2)
    return '::cuda_emu::Launch("%s", %s, %s)' % (re.sub(r"\s+", " ", name), name, cfg)


out = LAUNCH.sub(launch, src)
out = DYNAMIC.sub(lambda m: "%s* %s = reinterpret_cast<%s*>(::cuda_emu::DynamicShared());"
                  % (m.group(1), m.group(2), m.group(1)), out)


def static_shared(m):
    ty, name, dims = m.group(1), m.group(2), m.group(3).strip()
    return ("static thread_local ::cuda_emu::StaticShared<%s %s> %s_emu_shared; "
            "%s (&%s)%s = %s_emu_shared.get(); ::cuda_emu::RegisterShared(&%s, sizeof %s);"
            % (ty, dims, name, ty, name, dims, name, name, name))


out = STATIC.sub(static_shared, out)
with open(out_path, "w") as f:
    f.write('#line 1 "%s"\n' % src_path)
    f.write(out)
