"""The first seconds of scripts/gpu-check.sh's run (standard library only): what the machine is
and where the libraries the bundle leaves to it are, printed before any stage runs, so that one
failed call says what to fix for the next.

  machine()         OS, kernel, glibc, driver and the CUDA version it supports, GPUs seen
  pythons()         every python3 on the PATH (and GPU_CHECK_PYTHON): torch, transformers, their
                    pip nvidia-* library folders, and whether torch.compile can build here
                    (a C compiler and Python.h)
  find_libs()       libcuda / libcublasLt / libnccl / ...: the image's toolkit folders, the
                    loader's cache, then the pip nvidia-* folders of every python3
"""
import glob
import json
import os
import re
import shutil
import subprocess

TOOLKIT_DIRS = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64",
                "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64",
                "/usr/lib/wsl/lib"]

# Run by each python3 found: prints one JSON line. Never imports more than torch/transformers.
PROBE = r"""
import json, os, shutil, sys, sysconfig
d = {"executable": sys.executable, "version": sys.version.split()[0]}
try:
    import nvidia
    d["nvidia_dirs"] = [p for p in nvidia.__path__]
except Exception as e:
    d["nvidia_dirs"] = []
inc = sysconfig.get_paths().get("include") or ""
d["python_h"] = os.path.exists(os.path.join(inc, "Python.h"))
d["python_h_dir"] = inc
cc = os.environ.get("CC")
d["c_compiler"] = (shutil.which(cc) if cc else None) or shutil.which("cc") or \
    shutil.which("gcc") or shutil.which("clang")
try:
    import torch
    d["torch"] = torch.__version__
    d["torch_cuda"] = torch.version.cuda
    d["torch_cuda_available"] = torch.cuda.is_available()
    d["torch_compile"] = hasattr(torch, "compile")
    d["torch_lib"] = os.path.join(os.path.dirname(torch.__file__), "lib")
except Exception as e:
    d["torch_error"] = repr(e)[:200]
try:
    import transformers
    d["transformers"] = transformers.__version__
except Exception as e:
    d["transformers_error"] = repr(e)[:200]
print(json.dumps(d))
"""


def run(cmd, timeout=20):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "", str(e)


def machine():
    m = {}
    if os.path.exists("/etc/os-release"):
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                m["os"] = line.split("=", 1)[1].strip().strip('"')
    m["kernel"] = os.uname().release
    try:
        m["glibc"] = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    except (ValueError, OSError, AttributeError, IndexError):
        m["glibc"] = None
    smi = shutil.which("nvidia-smi")
    m["nvidia_smi"] = smi
    m["gpus"] = []
    if smi:
        rc, out, err = run([smi, "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"])
        m["gpus"] = [l.strip() for l in out.splitlines() if l.strip()]
        if rc != 0:
            m["nvidia_smi_error"] = (err or out).strip()[:300]
        if m["gpus"]:
            m["driver"] = m["gpus"][0].split(",")[1].strip()
        rc, out, _ = run([smi])
        v = re.search(r"CUDA Version:\s*([0-9.]+)", out or "")
        m["driver_cuda"] = v.group(1) if v else None
    if not m.get("driver") and os.path.exists("/proc/driver/nvidia/version"):
        v = re.search(r"Kernel Module\s+([0-9.]+)", open("/proc/driver/nvidia/version").read())
        m["driver"] = v.group(1) if v else None
    m["device_nodes"] = sorted(glob.glob("/dev/nvidia[0-9]*"))
    return m


def gpu_present(m):
    return bool(m.get("gpus") or m.get("device_nodes"))


def python_candidates(preferred=None):
    seen, out = set(), []
    cands = [preferred] if preferred else []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        for name in ("python3", "python"):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                cands.append(p)
    for p in cands:
        if not p:
            continue
        real = os.path.realpath(p)
        if real in seen:
            continue
        seen.add(real)
        out.append(p)
    return out


def pythons(preferred=None):
    found = []
    for p in python_candidates(preferred):
        rc, out, err = run([p, "-c", PROBE], timeout=60)
        line = next((l for l in (out or "").splitlines() if l.startswith("{")), None)
        if line is None:
            found.append({"executable": p, "error": (err or "no output").strip()[-200:]})
            continue
        d = json.loads(line)
        d["path"] = p
        found.append(d)
    return found


def compile_unavailable(py):
    """Why torch.compile cannot build kernels with this python, or None."""
    if not py or "torch" not in py:
        return "no PyTorch in this python"
    if not py.get("torch_compile"):
        return f"torch {py.get('torch')} has no torch.compile"
    if not py.get("c_compiler"):
        return "no C compiler (cc/gcc/clang) on the PATH: Inductor cannot build its kernels"
    if not py.get("python_h"):
        return f"no Python.h in {py.get('python_h_dir')}: Inductor cannot build its helpers"
    return None


def library_dirs(pys):
    dirs = list(TOOLKIT_DIRS)
    dirs += sorted(glob.glob("/usr/local/cuda-*/lib64"))
    dirs += sorted(glob.glob("/usr/local/cuda-*/targets/x86_64-linux/lib"))
    for py in pys:
        for root in py.get("nvidia_dirs", []):
            for d, _, files in os.walk(root):
                if any(f.startswith("lib") and ".so" in f for f in files):
                    dirs.append(d)
        if py.get("torch_lib"):
            dirs.append(py["torch_lib"])
    out = []
    for d in dirs:
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def ldconfig_cache():
    rc, out, _ = run(["ldconfig", "-p"]) if shutil.which("ldconfig") else (None, "", "")
    if rc is None and os.path.exists("/sbin/ldconfig"):
        rc, out, _ = run(["/sbin/ldconfig", "-p"])
    cache = {}
    for line in (out or "").splitlines():
        m = re.match(r"\s*(\S+) \(.*x86-64.*\) => (\S+)", line)
        if m and m.group(1) not in cache:
            cache[m.group(1)] = m.group(2)
    return cache


def find_libs(sonames, dirs):
    """{soname: path or None}: the first of DIRS (the toolkit's, then pip's) holding it, else
    the loader's cache."""
    cache = ldconfig_cache()
    found = {}
    for so in sonames:
        found[so] = next((os.path.join(d, so) for d in dirs
                          if os.path.exists(os.path.join(d, so))), cache.get(so))
    return found
