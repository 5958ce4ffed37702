#!/usr/bin/env python3
"""Bundling helpers of scripts/gpu-check.sh --prepare (standard library only).

  targets    the build targets behind the build's `gpu` CTest tests (binaries, not scripts)
  stage      copies those binaries, ringmaster-trainer and gelu_epilogue_probe into STAGE/bin,
             every shared library they need that the GPU image is not sure to have into
             STAGE/lib (libstdc++/libgcc_s into STAGE/lib-compat, used there only when the
             image's own are older), this machine's glibc with its loader and C++ runtime into
             STAGE/lib-glibc (used only where the image's glibc is older than the binaries
             need: they then start through the carried loader, see gpu_check_run.py), and
             writes STAGE/manifest.json (tests, glibc needed)
  long-rows  benchmark rows: generated sentences joined until each row has MIN_WORDS words, so
             that every batch is truncated to max_seq_len rather than padded to a short row
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

# Provided on the GPU machine by its driver, its CUDA toolkit (or PyTorch's CUDA wheels) and its
# C library; never bundled. libcudart is bundled (small, and pinned to the version built with).
SYSTEM_LIBS = re.compile(
    r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libutil\.so|"
    r"libresolv\.so|libcuda\.so|libcublas|libcublasLt|libnccl|libnvidia-)")
# The C++ runtime: the image's own is used unless it is older than the one built with.
COMPAT_LIBS = re.compile(r"^(libstdc\+\+\.so|libgcc_s\.so)")
# glibc (with its loader) and the C++ runtime, carried for an image whose glibc is older than
# the build machine's: not only the binaries but the Debian 12 libraries they need (libgomp,
# libgloo, libgfortran, libabsl_base, libstdc++, ...) ask for GLIBC_2.32-2.36 symbols, so
# static linking of the C++ runtime alone would not start them on glibc 2.31.
GLIBC_LIBS = re.compile(
    r"^(ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libutil\.so|"
    r"libresolv\.so|libstdc\+\+\.so|libgcc_s\.so)")
EXTRA_TARGETS = ["ringmaster-trainer", "gelu_epilogue_probe"]
# Test binaries that are plain programs, not gtest (no --gtest_output for them).
PLAIN_TEST_BINARIES = set(EXTRA_TARGETS) | {"bench_kernels"}


def ctest_tests(build):
    out = subprocess.run(["ctest", "--test-dir", build, "-L", "gpu", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tests"]


def ninja_targets(build):
    out = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], check=True,
                         capture_output=True, text=True).stdout
    return {line.split(":")[0].rsplit("/", 1)[-1] for line in out.splitlines()}


def target_of(test, known):
    """The executable target a test runs: its command's binary, else its name with _suffixes cut
    until a target matches (kernels_gpu_test_forward -> kernels_gpu_test)."""
    cmd = test.get("command")
    if cmd:
        exe = os.path.basename(cmd[0])
        if exe in ("bash", "sh", "python3", "python"):
            return None
        return exe
    name = test["name"]
    while name:
        if name in known:
            return name
        if "_" not in name:
            break
        name = name.rsplit("_", 1)[0]
    return None


def properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def cmd_targets(args):
    known = ninja_targets(args.build)
    found = sorted({t for t in (target_of(x, known) for x in ctest_tests(args.build)) if t})
    print(" ".join(found))


def ldd(path, env=None):
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True, env=env).stdout
    libs = {}
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"^(\S+) => (not found|\S+)", line)
        if m:
            libs[m.group(1)] = m.group(2)
    return libs


def symbol_versions(path, prefix):
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True).stdout
    versions = set(re.findall(r"\b" + prefix + r"_([0-9.]+)\b", out))
    return versions


def max_version(versions):
    return max(versions, key=lambda v: [int(x) for x in v.split(".")], default=None)


def cmd_stage(args):
    emulated = args.emulated == "1"
    stage = args.stage
    for d in ("bin", "lib", "lib-compat", "lib-glibc", "data", "tests"):
        os.makedirs(os.path.join(stage, d), exist_ok=True)
    tests = []
    binaries = set(EXTRA_TARGETS)
    for t in ctest_tests(args.build):
        cmd = t.get("command")
        if not cmd:
            sys.exit(f"gpu_check_bundle: test {t['name']} has no command after the build "
                     "(its binary is missing)")
        exe = os.path.basename(cmd[0])
        if exe in ("bash", "sh"):
            continue  # tests/trainer_cuda_engine.sh: the engine stage runs it from the repo
        binaries.add(exe)
        env = {}
        for kv in properties(t).get("ENVIRONMENT", []):
            k, _, v = kv.partition("=")
            env[k] = v
        # gtest binaries get --gtest_output; the probe's tests and bench_kernels are plain programs.
        tests.append({"name": t["name"], "bin": exe, "args": cmd[1:], "env": env,
                      "gtest": exe not in PLAIN_TEST_BINARIES})
    paths = {}
    for b in sorted(binaries):
        found = None
        for root, _, files in os.walk(args.build):
            if b in files and os.access(os.path.join(root, b), os.X_OK):
                found = os.path.join(root, b)
                break
        if found is None:
            sys.exit(f"gpu_check_bundle: {b} not found in {args.build}")
        paths[b] = found
        shutil.copy2(found, os.path.join(stage, "bin", b))
    libs, glibc_libs = {}, {}
    for b, p in paths.items():
        for soname, where in ldd(p).items():
            if where == "not found":
                sys.exit(f"gpu_check_bundle: {b} needs {soname}, which is not found here")
            if GLIBC_LIBS.match(soname):
                glibc_libs[soname] = where
            if SYSTEM_LIBS.match(soname):
                continue
            libs[soname] = where
    for soname, where in sorted(libs.items()):
        sub = "lib-compat" if COMPAT_LIBS.match(soname) else "lib"
        shutil.copy(os.path.realpath(where), os.path.join(stage, sub, soname))
    # The loader, and every part of glibc a library the image supplies may name: the driver's
    # libcuda still asks for libpthread/libdl/librt, which must come from the same glibc.
    for soname in ("ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libpthread.so.0",
                   "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2"):
        for d in ("/lib/x86_64-linux-gnu", "/lib64", "/usr/lib/x86_64-linux-gnu"):
            if soname not in glibc_libs and os.path.exists(os.path.join(d, soname)):
                glibc_libs[soname] = os.path.join(d, soname)
    for soname, where in sorted(glibc_libs.items()):
        shutil.copy(os.path.realpath(where), os.path.join(stage, "lib-glibc", soname))
    glibc, glibcxx = set(), set()
    for p in list(paths.values()) + [os.path.realpath(w) for w in libs.values()]:
        glibc |= symbol_versions(p, "GLIBC")
        glibcxx |= symbol_versions(p, "GLIBCXX")
    os_name = ""
    if os.path.exists("/etc/os-release"):
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip().strip('"')
    cache = open(os.path.join(args.build, "CMakeCache.txt")).read()
    cuda = re.search(r"FIND_PACKAGE_MESSAGE_DETAILS_CUDAToolkit:\w*=.*\[v([0-9.]+)", cache)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    manifest = {
        "emulated": emulated,
        "commit": commit,
        "built_on": os_name,
        "cuda_built_with": cuda.group(1) if cuda else None,
        "glibc_required": max_version(glibc),
        "glibcxx_required": max_version(glibcxx),
        "tests": tests,
        "binaries": sorted(paths),
        "libs": sorted(libs),
        "glibc_carried": sorted(glibc_libs),
        "not_bundled": "libc/libm/libdl/librt/libpthread (glibc), libcuda (driver), "
                       "libcublasLt and libnccl (the GPU image's CUDA toolkit or PyTorch wheels)",
    }
    with open(os.path.join(stage, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"gpu_check_bundle: {len(paths)} binaries, {len(tests)} tests, {len(libs)} libraries; "
          f"needs glibc >= {manifest['glibc_required']}, "
          f"GLIBCXX >= {manifest['glibcxx_required']} (libstdc++ bundled as a fallback)")


def cmd_long_rows(args):
    with open(args.input) as f:
        header = f.readline()
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    out, i = [], 0
    while len(out) < args.rows:
        words, label = [], rows[i % len(rows)][1]
        while len(words) < args.min_words:
            words += rows[i % len(rows)][0].split()
            i += 1
        out.append(" ".join(words) + "\t" + label)
    with open(args.output, "w") as f:
        f.write(header)
        f.write("\n".join(out) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("targets")
    t.add_argument("--build", required=True)
    t.add_argument("--ctest-json")  # accepted for symmetry; the tests are read from ctest
    s = sub.add_parser("stage")
    s.add_argument("--build", required=True)
    s.add_argument("--stage", required=True)
    s.add_argument("--emulated", default="0")
    s.add_argument("--ctest-json")
    r = sub.add_parser("long-rows")
    r.add_argument("--input", required=True)
    r.add_argument("--output", required=True)
    r.add_argument("--rows", type=int, default=2048)
    r.add_argument("--min-words", type=int, default=160)
    args = p.parse_args()
    {"targets": cmd_targets, "stage": cmd_stage, "long-rows": cmd_long_rows}[args.cmd](args)


if __name__ == "__main__":
    main()
