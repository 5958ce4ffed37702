#!/usr/bin/env python3
"""Rewrites what a host C++ compiler cannot parse in a CUDA source, for the emulator build.

  k<<<grid, block[, shared[, stream]]>>>(args)  ->  ::cuda_emu::Launch("k", k, grid, block, ...)(args)
  extern __shared__ T name[];                   ->  T* name = reinterpret_cast<T*>(::cuda_emu::DynamicShared());
  __shared__ T name[N]...;                      ->  T (&name)[N]... bound to a per-thread heap copy
                                                    (::cuda_emu::StaticShared, 8 bytes of TLS), then
                                                    ::cuda_emu::RegisterShared(&name, sizeof name)
                                                    (the race detector learns the variable's extent)

A launch of a kernel that cuda_emu_fiber_free.py finds fiber-free (no barrier, no warp
collective, no shared memory in anything it reaches) becomes ::cuda_emu::LaunchFiberFree(...):
the emulator runs its threads to completion one after another without fibers (docs/cuda.md,
"The fast path"). A launch of a kernel not defined in this source keeps fibers. The verdict for
each kernel, and why, is written as a comment at the end of the output.

Line numbers are kept (#line and no added newlines), so compiler errors, sanitizer reports and
the emulator's own reports point at the .cu file.
Usage: cuda_emu_rewrite.py IN.cu OUT.cc [--include-root DIR]... [--depfile OUT.d]
       cuda_emu_rewrite.py --classify IN.cu [--include-root DIR]...   (prints the verdicts)
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_emu_fiber_free  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("src_path")
parser.add_argument("out_path", nargs="?")
parser.add_argument("--include-root", action="append", default=[])
parser.add_argument("--depfile")
parser.add_argument("--classify", action="store_true")
args = parser.parse_args()
src_path, out_path = args.src_path, args.out_path
with open(src_path) as f:
    src = f.read()
verdicts, scanned = cuda_emu_fiber_free.classify(src_path, args.include_root)
if args.classify:
    for name, why in verdicts.items():
        print("%s: %s" % (name, "fiber-free" if why is None else "fibers (%s)" % why))
    sys.exit(0)

# Kernel name: an identifier, optionally qualified, optionally with one level of template args.
LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>", re.S)
DYNAMIC = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>\s\*]+?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC = re.compile(
    r"(?<!extern )__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>\s\*]+?)\s+(\w+)\s*((?:\[[^\];]*\]\s*)*);")


def launch(m):
    name, cfg = m.group(1), m.group(2)
    base = name.split("<")[0].strip().split("::")[-1]
    fast = base in verdicts and verdicts[base] is None
    return '::cuda_emu::%s("%s", %s, %s)' % ("LaunchFiberFree" if fast else "Launch",
                                              re.sub(r"\s+", " ", name), name, cfg)


out = LAUNCH.sub(launch, src)
out = DYNAMIC.sub(lambda m: "%s* %s = reinterpret_cast<%s*>(::cuda_emu::DynamicShared());"
                  % (m.group(1), m.group(2), m.group(1)), out)


def static_shared(m):
    ty, name, dims = m.group(1), m.group(2), m.group(3).strip()
    return ("static thread_local ::cuda_emu::StaticShared<%s %s> %s_emu_shared; "
            "%s (&%s)%s = %s_emu_shared.get(); ::cuda_emu::RegisterShared(&%s, sizeof %s);"
            % (ty, dims, name, ty, name, dims, name, name, name))


out = STATIC.sub(static_shared, out)
summary = "".join("\n// cuda_emu: %s %s" % (name, "fiber-free" if why is None else "keeps fibers: " + why)
                  for name, why in verdicts.items())
with open(out_path, "w") as f:
    f.write('#line 1 "%s"\n' % src_path)
    f.write(out)
    f.write("\n" + summary + "\n")
if args.depfile:
    with open(args.depfile, "w") as f:
        f.write("%s: %s\n" % (out_path, " ".join(p.replace(" ", "\\ ") for p in scanned)))
