#!/usr/bin/env python3
"""The run of scripts/gpu-check.sh (--run on a lent GPU, --emulate here). Standard library only.

Stages, each time-boxed inside --budget seconds by the plan in gpu_check_plan.py (a stage that
finds no time left is reported as skipped, never silently dropped), in this order:
  bench       ringmaster-trainer's CUDA engine (fp32; bf16 where accepted) against PyTorch
              (eager fp32, eager bf16 + SDPA, torch.compile) and a bf16 matmul ceiling: first,
              the answer most needed
  tests       every gpu test binary of the bundle (gtest XML, exit codes)
  engine      tests/trainer_cuda_engine.sh: the CUDA engine against the CPU engine, one job
  gelu        gelu_epilogue_probe: cuBLASLt's GELU epilogue against exact-erf and tanh GELU
  kernels     bench_kernels: each CUDA kernel and the Linear GEMM validated against its CPU
              reference, then timed against the measured copy / GEMM ceilings
  sanitizers  compute-sanitizer memcheck / racecheck / synccheck / initcheck on the tests
  finetune    an SST-2-size fine-tune (3 epochs, batch 32, seq 64), timed, with dev accuracy
Writes OUT/gpu-check.log, OUT/gpu-check.json and OUT/details.tgz (per-stage logs, gtest XML).
Exit 0 when nothing failed (skips allowed), 1 otherwise.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check_plan as plan  # noqa: E402
import gpu_check_preflight as preflight  # noqa: E402

STAGE_ORDER = plan.STAGE_ORDER

# Shapes: BERT-base at the sizes on a GPU; tiny ones for the emulator rehearsal.
GPU_SHAPES = {
    "model": {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
              "num_attention_heads": 12, "intermediate_size": 3072},
    "bench": {"seq": 128, "batch": 32, "warmup": 5, "steps": 30, "torch_steps": 20,
              "matmul_n": 8192},
    "finetune": {"seq": 64, "batch": 32, "epochs": 3, "lr": 1.0e-4},
}
EMU_SHAPES = {
    "model": {"vocab_size": 1024, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64},
    "bench": {"seq": 32, "batch": 4, "warmup": 2, "steps": 4, "torch_steps": 3,
              "matmul_n": 256},
    "finetune": {"seq": 64, "batch": 32, "epochs": 3, "lr": 1.0e-3},
}


def now():
    return time.monotonic()


class Runner:
    def __init__(self, args):
        self.args = args
        self.emulated = args.emulate
        self.bundle = os.path.abspath(args.bundle)
        self.repo = os.path.abspath(args.repo)
        self.out = os.path.abspath(args.out)
        self.details = os.path.join(self.out, "details")
        os.makedirs(self.details, exist_ok=True)
        self.work = os.path.join(self.bundle, "work")
        os.makedirs(self.work, exist_ok=True)
        self.logf = open(os.path.join(self.out, "gpu-check.log"), "w")
        self.start = now()
        self.deadline = self.start + args.budget
        self.manifest = json.load(open(os.path.join(self.bundle, "manifest.json")))
        self.shapes = EMU_SHAPES if self.emulated or args.tiny else GPU_SHAPES
        # The python with PyTorch: the image's python3 on the GPU machine; GPU_CHECK_PYTHON (a
        # virtual environment, say) elsewhere.
        self.python = (os.environ.get("GPU_CHECK_PYTHON") or shutil.which("python3")
                       or sys.executable)
        self.failed = []
        self.result = {
            "mode": "emulated" if self.emulated else "gpu",
            "note": ("emulator rehearsal on the CPU: NOT a performance figure" if self.emulated
                     else "real GPU run"),
            "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "budget_s": args.budget,
            "shapes": "tiny" if self.emulated or args.tiny else "bert-base",
            "bundle": {k: self.manifest.get(k) for k in
                       ("commit", "built_on", "cuda_built_with", "glibc_required",
                        "glibcxx_required", "emulated")},
            "stages": {},
        }
        self.env = dict(os.environ)
        self.cuda_dirs = []
        self.carried_glibc = False
        self.gpu_present = False
        self.preflight = {}

    # ---- output -------------------------------------------------------------------------------
    def log(self, msg=""):
        stamp = f"[{now() - self.start:6.1f}s] "
        for line in str(msg).splitlines() or [""]:
            print(stamp + line, flush=True)
            self.logf.write(stamp + line + "\n")
        self.logf.flush()

    def remaining(self):
        return self.deadline - now()

    def sh(self, cmd, timeout, name, env=None, cwd=None, poll=None):
        """Runs cmd (list) with output to details/NAME.txt; kills its process group at timeout.
        poll(proc) is called every 5 ms while it runs. Returns (rc, seconds, timed_out, text)."""
        path = os.path.join(self.details, name + ".txt")
        timeout = max(1.0, timeout)
        t0 = now()
        with open(path, "w") as f:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            try:
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env or self.env,
                                     cwd=cwd or self.work, start_new_session=True)
            except OSError as e:
                f.write(f"cannot start: {e}\n")
                return 127, 0.0, False, f"cannot start: {e}"
            timed_out = False
            while p.poll() is None:
                if poll is not None:
                    poll(p)
                if now() - t0 > timeout:
                    timed_out = True
                    try:
                        os.killpg(p.pid, signal.SIGTERM)
                        p.wait(5)
                    except (subprocess.TimeoutExpired, ProcessLookupError):
                        try:
                            os.killpg(p.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    p.wait()
                    break
                time.sleep(0.005)
            if poll is not None:
                poll(p)
        text = open(path, errors="replace").read()
        return p.returncode, now() - t0, timed_out, text

    # ---- environment --------------------------------------------------------------------------
    def lib_env(self, compat):
        dirs = [os.path.join(self.bundle, "lib")]
        if compat:
            dirs.insert(0, os.path.join(self.bundle, "lib-compat"))
        dirs += self.cuda_dirs
        old = os.environ.get("LD_LIBRARY_PATH")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = ":".join(dirs + ([old] if old else []))
        env.setdefault("OMP_NUM_THREADS", "8" if not self.emulated else "2")
        return env

    def write_wrappers(self):
        """BUNDLE/binw/NAME: starts bin/NAME through the carried glibc's loader with the carried
        glibc first on its --library-path (which, unlike LD_LIBRARY_PATH, is not inherited: the
        image's own programs that a test starts keep the image's glibc)."""
        d = os.path.join(self.bundle, "binw")
        os.makedirs(d, exist_ok=True)
        loader = os.path.join(self.bundle, "lib-glibc", "ld-linux-x86-64.so.2")
        path = ":".join([os.path.join(self.bundle, "lib-glibc"), os.path.join(self.bundle, "lib")]
                        + self.cuda_dirs)
        for b in self.manifest["binaries"]:
            w = os.path.join(d, b)
            with open(w, "w") as f:
                f.write(f'#!/bin/sh\nexec "{loader}" --library-path "{path}" '
                        f'"{os.path.join(self.bundle, "bin", b)}" "$@"\n')
            os.chmod(w, 0o755)
        return loader, path

    def unresolved(self, env):
        """(missing sonames, version errors) of the bundle's binaries as the loader that will
        start them sees it (ldd, or the carried loader's --list)."""
        missing, version_errors = set(), []
        for b in self.manifest["binaries"]:
            if self.carried_glibc:
                cmd = [self.loader, "--library-path", self.loader_path, "--list",
                       os.path.join(self.bundle, "bin", b)]
            elif shutil.which("ldd"):
                cmd = ["ldd", os.path.join(self.bundle, "bin", b)]
            else:
                return set(), []
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            for line in (r.stdout + r.stderr).splitlines():
                m = re.match(r"\s*(\S+) => not found", line) or re.search(
                    r"error while loading shared libraries: (\S+): cannot open", line)
                if m:  # (the loader's --list stops at the first library it cannot find)
                    missing.add(m.group(1))
                if "version `" in line and "not found" in line:
                    version_errors.append(line.strip())
        return missing, version_errors

    def setup(self):
        """The preflight: prints the machine, where the libraries left to the image were found,
        how the bundle will start and what will be skipped; then checks that every binary loads
        and starts (--version)."""
        m = preflight.machine()
        self.gpu_present = (not self.emulated) and preflight.gpu_present(m)
        self.log("preflight: " + json.dumps(m))
        need = self.manifest.get("glibc_required")
        self.carried_glibc = (not self.emulated and bool(self.manifest.get("glibc_carried"))
                              and plan.needs_carried_glibc(m.get("glibc"), need))
        self.log(f"preflight: glibc {m.get('glibc')} here, bundle needs {need} (built on "
                 f"{self.manifest.get('built_on')}): "
                 + ("binaries start through the carried glibc's loader" if self.carried_glibc
                    else "binaries start with the image's glibc"))
        built = self.manifest.get("cuda_built_with")
        if built and m.get("driver_cuda") and \
                plan.version_tuple(m["driver_cuda"]) < plan.version_tuple(built)[:2]:
            self.log(f"preflight: WARNING: the driver supports CUDA {m['driver_cuda']}, the "
                     f"bundle's runtime is CUDA {built}: expect every gpu test to find no usable "
                     "device (counted as failures)")
        pys = preflight.pythons(os.environ.get("GPU_CHECK_PYTHON"))
        with_torch = [p for p in pys if "torch" in p]
        if not os.environ.get("GPU_CHECK_PYTHON") and with_torch:
            self.python = with_torch[0]["path"]
        chosen = next((p for p in pys if p.get("path") == self.python), None)
        for p in pys:
            self.log("preflight: python " + json.dumps(p))
        dirs = preflight.library_dirs(pys)
        self.cuda_dirs = []
        sonames = ["libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libnccl.so.2"]
        self.env = env = self.lib_env(False)
        if self.carried_glibc:
            self.loader, self.loader_path = self.write_wrappers()
        missing, _ = self.unresolved(env)
        sonames += sorted(x for x in missing if x not in sonames)
        found = preflight.find_libs(sonames, dirs)
        self.log("preflight: libraries " + json.dumps(found))
        # Every folder where one was found goes on the path (the loader's --list names only the
        # first library it misses, so "missing" alone is not the whole list).
        for so in sonames:
            if found.get(so):
                d = os.path.dirname(found[so])
                if d not in self.cuda_dirs:
                    self.cuda_dirs.append(d)
        compat = False
        env = self.lib_env(False)
        if self.carried_glibc:
            self.loader, self.loader_path = self.write_wrappers()
        missing, version_errors = self.unresolved(env)
        if not self.carried_glibc and any("GLIBCXX" in v or "CXXABI" in v or "GCC_" in v
                                          for v in version_errors):
            compat = True  # the image's libstdc++ is older than the one built with
            env = self.lib_env(True)
            missing, version_errors = self.unresolved(env)
        if self.carried_glibc:
            # The wrappers carry the library path; the image's own programs that a stage starts
            # (bash, python3) must not load the bundle's Debian 12 libraries.
            env = dict(os.environ)
            env.setdefault("OMP_NUM_THREADS", "8")
        self.env = env
        skips = []
        self.preflight = {"torch_compile_unavailable": preflight.compile_unavailable(chosen)}
        if not chosen or "torch" not in chosen:
            skips.append(f"the PyTorch rows (no torch in {self.python})")
        elif self.preflight["torch_compile_unavailable"]:
            skips.append("torch.compile: " + self.preflight["torch_compile_unavailable"])
        if not self.emulated and self.find_sanitizer() is None:
            skips.append("sanitizers (compute-sanitizer absent)")
        if not self.gpu_present and not self.emulated:
            skips.append("nothing on purpose, but no GPU is visible: every CUDA stage will fail")
        self.result["env"] = {**m, "libs": found, "python": self.python,
                              "pythons": pys, "bundled_libstdcxx_used": compat,
                              "carried_glibc_used": self.carried_glibc, "will_skip": skips}
        self.log(f"preflight: PyTorch side: {self.python}; library folders added: "
                 f"{self.cuda_dirs}; will skip: {skips or 'nothing'}")
        if missing or version_errors:
            msg = (f"the bundle cannot load here: missing {sorted(missing)}; "
                   f"{version_errors[:3]} (it needs glibc >= {need}, built on "
                   f"{self.manifest.get('built_on')})")
            self.log("FAIL: " + msg)
            self.result["setup_error"] = msg
            return False
        # Each binary must start, not only resolve: --version / --gtest_list_tests.
        for b in self.manifest["binaries"]:
            args = ["--version"] if b == "ringmaster-trainer" else \
                ["--gtest_list_tests"] if b.endswith("_test") else None
            if args is None:
                continue
            rc, secs, to, text = self.sh([self.bin(b)] + args, 30, "start-" + b)
            # 77 is the gpu tests' "no CUDA device" after listing: the binary started (the tests
            # stage judges 77 itself, a failure on a GPU machine).
            if rc != 0 and not (rc == 77 and b.endswith("_test")):
                msg = f"{b} {args[0]} exits {rc}: {text.strip().splitlines()[-1:]}"
                self.log("FAIL: " + msg)
                self.result["setup_error"] = msg
                return False
        self.log(f"preflight: every bundled binary starts ({len(self.manifest['binaries'])})")
        return True

    # ---- stages -------------------------------------------------------------------------------
    def stage_budget(self, name):
        return plan.stage_budget(name, self.stages, self.remaining(), self.emulated)

    def bin(self, name):
        """The command that starts bundled binary NAME: the binary itself, or its wrapper that
        starts it through the carried glibc's loader where the image's glibc is too old."""
        d = "binw" if self.carried_glibc else "bin"
        return os.path.join(self.bundle, d, name)

    def gtest_counts(self, xml):
        try:
            root = ET.parse(xml).getroot()
        except (OSError, ET.ParseError):
            return None
        a = root.attrib
        c = {k: int(a.get(k, 0)) for k in ("tests", "failures", "errors", "skipped",
                                             "disabled")}
        c["failed_cases"] = [f"{tc.attrib.get('classname')}.{tc.attrib.get('name')}"
                             for tc in root.iter("testcase") if tc.find("failure") is not None]
        return c

    def run_tests(self, budget):
        end = now() + budget
        rows = []
        for t in self.manifest["tests"]:
            left = end - now()
            if left < 5:
                rows.append({"name": t["name"], "status": "skipped: no time left"})
                continue
            xml = os.path.join(self.details, f"gtest-{t['name']}.xml")
            env = dict(self.env)
            env.update(t["env"])
            cmd = [self.bin(t["bin"])] + t["args"]
            if t.get("gtest", True):
                cmd.append(f"--gtest_output=xml:{xml}")
            rc, secs, to, text = self.sh(cmd, min(left, 300 if self.emulated else 120),
                                         "test-" + t["name"], env=env)
            status, failed = plan.test_status(rc, to, self.gpu_present)
            row = {"name": t["name"], "status": status, "seconds": round(secs, 2),
                   "gtest": self.gtest_counts(xml)}
            rows.append(row)
            self.log(f"  {t['name']}: {status} in {secs:.1f}s"
                     + (f" {row['gtest']['failed_cases']}" if row["gtest"] and
                        row["gtest"]["failed_cases"] else ""))
            if failed:
                self.failed.append("tests:" + t["name"])
                self.log("\n".join("    " + l for l in text.splitlines()[-25:]))
        return {"tests": rows}

    def run_engine(self, budget):
        script = os.path.join(self.repo, "tests", "trainer_cuda_engine.sh")
        env = dict(self.env)
        env["TRAINER"] = self.bin("ringmaster-trainer")
        rc, secs, to, text = self.sh(["bash", script], budget, "engine", env=env)
        r = {"exit": rc, "seconds": round(secs, 1), "timed_out": to}
        m = re.search(r"max relative loss difference (\S+) over (\d+) steps", text)
        if m:
            r["max_rel_loss_diff"] = float(m.group(1))
            r["steps"] = int(m.group(2))
        m = re.search(r"dev accuracy: cpu (\S+), cuda (\S+)", text)
        if m:
            r["dev_accuracy_cpu"], r["dev_accuracy_cuda"] = m.group(1), m.group(2)
        r["status"] = ("timeout" if to else "pass" if rc == 0 else "skipped (77)" if rc == 77
                       else f"fail (exit {rc})")
        if r["status"] not in ("pass",) and not r["status"].startswith("skipped"):
            self.failed.append("engine")
        self.log("\n".join("  " + l for l in text.splitlines()[-12:]))
        return r

    def run_gelu(self, budget):
        rc, secs, to, text = self.sh([self.bin("gelu_epilogue_probe")],
                                     budget, "gelu-probe")
        r = {"exit": rc, "seconds": round(secs, 2)}
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    r.update(json.loads(line))
                except json.JSONDecodeError:
                    pass
        if self.emulated:
            r["meaning"] = ("the emulator's cuBLASLt stand-in answers its own setting "
                            "(CUDA_EMU_CUBLASLT_GELU, tanh by default), not a GPU's")
        r["status"] = "pass" if rc == 0 else "skipped (77)" if rc == 77 else f"fail (exit {rc})"
        if rc not in (0, 77):
            self.failed.append("gelu")
        self.log("  " + text.strip().splitlines()[-1] if text.strip() else "  (no output)")
        return r

    def run_kernels(self, budget):
        exe = self.bin("bench_kernels")
        if not os.path.exists(exe):
            return {"status": "skipped: bench_kernels is not in the bundle"}
        js = os.path.join(self.details, "bench_kernels.json")
        cmd = [exe, "--json", js] + (["--small"] if self.emulated or self.args.tiny else [])
        rc, secs, to, text = self.sh(cmd, budget, "bench-kernels")
        r = {"exit": rc, "seconds": round(secs, 2)}
        try:
            with open(js) as f:
                r.update(json.load(f))
        except (OSError, json.JSONDecodeError):
            pass
        if self.emulated:
            r["meaning"] = "the emulator's CPU times, not GPU figures"
        r["status"] = ("timeout" if to else "pass" if rc == 0 else "skipped (77)" if rc == 77
                       else f"fail (exit {rc})")
        if not (r["status"] == "pass" or r["status"].startswith("skipped")):
            self.failed.append("kernels")
        self.log("\n".join("  " + l for l in text.strip().splitlines()[-30:]))
        return r

    def write_job(self, name, model, data, train, precision):
        cfg = ", ".join(f"{k}: {v}" for k, v in model.items())
        eval_line = f", eval: {data['eval']}" if data.get("eval") else ""
        text = f"""model:
  config: {{{cfg}, max_position_embeddings: 512, hidden_dropout_prob: 0.1,
           attention_probs_dropout_prob: 0.1}}
  vocab: {os.path.join(self.bundle, 'data', 'sst2', 'vocab.txt')}
data: {{train: {data['train']}{eval_line}, max_seq_len: {data['seq']}, shuffle: true}}
train: {{{train}, global_batch_size: {data['batch']}, micro_batch_size: {data['batch']},
        seed: 7, device: cuda, precision: {precision}}}
output: {{dir: {os.path.join(self.work, name)}, checkpoint_every_steps: 0}}
"""
        path = os.path.join(self.work, name + ".yaml")
        shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)
        open(path, "w").write(text)
        return path

    def run_trainer(self, name, job, timeout, done=None):
        """ringmaster-trainer train on JOB, timing each step by when its metrics line appears.
        The process is killed once done(steps, evals) holds: neither the benchmark nor the timed
        fine-tune needs the export of the model (seconds of writing BERT-base's state)."""
        metrics = os.path.join(self.work, name, "metrics.jsonl")
        seen = {"offset": 0, "buf": "", "steps": {}, "evals": []}

        def poll(_):
            try:
                with open(metrics) as f:
                    f.seek(seen["offset"])
                    chunk = f.read()
                    seen["offset"] = f.tell()
            except OSError:
                return
            t = now()
            seen["buf"] += chunk
            *lines, seen["buf"] = seen["buf"].split("\n")
            for line in lines:
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "loss" in d:
                    seen["steps"][d["step"]] = (t, d["loss"])
                if "gpu_peak_allocated_bytes" in d:  # the process's own CUDA allocation peak
                    seen["gpu_peak"] = max(seen.get("gpu_peak", 0), d["gpu_peak_allocated_bytes"])
                if "eval_accuracy" in d:
                    seen["evals"].append({"epoch": d.get("epoch"), "step": d.get("step"),
                                          "accuracy": d["eval_accuracy"],
                                          "loss": d.get("eval_loss")})

        trainer = self.bin("ringmaster-trainer")
        started = {"pid": None}

        def poll_and_pid(p):
            if started["pid"] is None:
                started["pid"] = p.pid
            poll(p)
            if done is not None and done(seen["steps"], seen["evals"]) and \
                    p.poll() is None and not started.get("killed"):
                started["killed"] = True
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        rc, secs, to, text = self.sh([trainer, "train", "--config", job], timeout, name,
                                     poll=poll_and_pid)
        r = {"exit": rc, "wall_s": round(secs, 2), "timed_out": to}
        if started.get("killed"):
            r["exit"] = 0
            r["note"] = "killed once its figures were in (the export is not needed)"
        if "gpu_peak" in seen:
            r["gpu_mem_process_peak_mib"] = round(seen["gpu_peak"] / 2 ** 20, 1)
            r["gpu_mem_source"] = "the trainer's own CUDA allocations (metrics.jsonl)"
        r["engine_line"] = next((l.strip() for l in text.splitlines() if "CUDA engine" in l), None)
        steps = seen["steps"]
        r["steps_done"] = max(steps) if steps else 0
        if steps:
            r["loss_first"] = steps[min(steps)][1]
            r["loss_last"] = steps[max(steps)][1]
        r["evals"] = seen["evals"]
        r["_steps"] = steps
        r["_text"] = text
        return r

    @staticmethod
    def rate(steps, skip):
        """Seconds per step between the (skip)-th and the last step seen."""
        ks = sorted(steps)
        if len(ks) < skip + 2:
            return None
        a, b = ks[skip], ks[-1]
        dt = steps[b][0] - steps[a][0]
        return dt / (b - a) if dt > 0 else None

    def bench_trainer(self, precision, timeout):
        b, m = self.shapes["bench"], self.shapes["model"]
        data = {"train": os.path.join(self.bundle, "data", "bench.tsv"), "seq": b["seq"],
                "batch": b["batch"]}
        total = b["warmup"] + b["steps"]
        job = self.write_job(f"bench-{precision}", m, data,
                             f"epochs: 1, max_steps: {total}, lr: 2.0e-5", precision)
        r = self.run_trainer(f"bench-{precision}", job, timeout,
                             done=lambda steps, _: bool(steps) and max(steps) >= total)
        text = r.pop("_text")
        steps = r.pop("_steps")
        if r["exit"] == 3 and precision != "fp32":  # a bad job: this precision is refused
            why = next((l.strip() for l in reversed(text.splitlines()) if "precision" in l), "")
            return {"status": f"not available (the trainer refuses precision: {precision} on "
                              "cuda, exit 3)", "refusal": why[-300:]}
        spp = self.rate(steps, b["warmup"])
        if r["exit"] != 0 or spp is None:
            r["status"] = f"fail (exit {r['exit']}{', timed out' if r['timed_out'] else ''})"
            self.log("\n".join("    " + l for l in text.splitlines()[-15:]))
            return r
        r["status"] = "pass"
        r["step_ms"] = spp * 1e3
        r["samples_per_s"] = b["batch"] / spp
        r["tokens_per_s"] = b["batch"] * b["seq"] / spp
        r["measured_steps"] = f"{sorted(steps)[b['warmup']]}..{max(steps)}"
        return r

    def bench_torch(self, extra, timeout, name):
        cmd = [self.python, os.path.join(self.repo, "scripts", "gpu_bench_torch.py")] + extra
        env = dict(os.environ)  # PyTorch with its own libraries, not the bundle's
        rc, secs, to, text = self.sh(cmd, timeout, name, env=env)
        r = {}
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    pass
        if rc == 0 and r.get("peak_allocated_mib") is not None:
            r["gpu_mem_process_peak_mib"] = round(r["peak_allocated_mib"], 1)
            r["gpu_mem_source"] = "torch.cuda.max_memory_allocated()"
        r["wall_s"] = round(secs, 1)
        if to:
            r["status"] = "timeout"
        elif rc == 3:
            r["status"] = "not available: " + r.get("error", "?")
        elif rc == 4:  # the variant failed inside PyTorch/transformers; the run goes on
            r["status"] = "fail (in PyTorch: " + r.get("error", "?")[:300] + ")"
            self.log("\n".join("    " + l for l in text.splitlines()[-10:]))
        elif rc != 0:
            r["status"] = f"fail (exit {rc})"
            self.log("\n".join("    " + l for l in text.splitlines()[-10:]))
        else:
            r["status"] = "pass"
        return r

    def flops_per_sample(self, seq):
        m = self.shapes["model"]
        h, L, i = m["hidden_size"], m["num_hidden_layers"], m["intermediate_size"]
        dense = L * (4 * h * h + 2 * h * i)  # QKV, attention output, the two FFN matrices
        # forward+backward = 3 x forward's 2 flops per multiply-add; attention's two products
        # (QK^T, PV) are 2*2*s^2*h per layer forward; the pooler and classifier once per sample.
        return 6 * seq * dense + 3 * 4 * L * seq * seq * h + 6 * h * h

    def run_bench(self, budget):
        end = now() + budget
        b, m = self.shapes["bench"], self.shapes["model"]
        r = {"shape": {"model": m, "seq": b["seq"], "batch": b["batch"],
                       "ringmaster_steps_timed": b["steps"], "torch_steps_timed": b["torch_steps"]}}
        r["flops_per_sample"] = self.flops_per_sample(b["seq"])
        geo = ["--batch", str(b["batch"]), "--seq", str(b["seq"]), "--vocab",
               str(m["vocab_size"]), "--hidden", str(m["hidden_size"]), "--layers",
               str(m["num_hidden_layers"]), "--heads", str(m["num_attention_heads"]),
               "--intermediate", str(m["intermediate_size"]), "--steps", str(b["torch_steps"]),
               "--warmup", "3" if not self.emulated else "2"]
        compile_why = self.preflight.get("torch_compile_unavailable")
        fns = {
            "matmul_bf16_ceiling": lambda t: self.bench_torch(
                ["--mode", "matmul", "--n", str(b["matmul_n"]), "--steps", "10"], t, "bench-matmul"),
            "ringmaster_fp32": lambda t: self.bench_trainer("fp32", t),
            "ringmaster_bf16": lambda t: self.bench_trainer("bf16", t),
            "torch_eager_fp32": lambda t: self.bench_torch(
                ["--mode", "bert", "--variant", "eager-fp32"] + geo, t, "bench-torch-eager-fp32"),
            "torch_eager_bf16_sdpa": lambda t: self.bench_torch(
                ["--mode", "bert", "--variant", "eager-bf16-sdpa"] + geo, t,
                "bench-torch-eager-bf16"),
            # Warmed until its step time is stable (a recompile must not land in the timed
            # steps), within the item's time box less a margin for the timed steps.
            "torch_compile_bf16_sdpa": lambda t: self.bench_torch(
                ["--mode", "bert", "--variant", "compile-bf16-sdpa", "--until-stable",
                 "--warmup-max-s", str(max(5, int(t * 0.6)))] + geo, t, "bench-torch-compile"),
        }
        for key, cap in plan.BENCH_PLAN:
            t = plan.item_budget(cap, end - now(), self.emulated)
            if key == "torch_compile_bf16_sdpa" and compile_why:
                r[key] = {"status": f"not available: {compile_why}"}
                self.log(f"  {key}: not available ({compile_why})")
                continue
            if t is None:
                r[key] = {"status": "skipped: no time left"}
                self.log(f"  {key}: skipped (no time left)")
                continue
            r[key] = fns[key](t)
            s = r[key]
            self.log(f"  {key}: {s.get('status')}"
                     + (f", {s['samples_per_s']:.1f} samples/s" if "samples_per_s" in s else "")
                     + (f", {s['tflops']:.1f} TFLOP/s" if "tflops" in s else ""))
        ceiling = r["matmul_bf16_ceiling"].get("tflops")
        for key in list(r):
            s = r[key]
            if isinstance(s, dict) and "samples_per_s" in s:
                s["achieved_tflops"] = s["samples_per_s"] * r["flops_per_sample"] / 1e12
                if ceiling:
                    s["mfu_vs_bf16_matmul"] = s["achieved_tflops"] / ceiling
        if r["ringmaster_fp32"].get("status", "").startswith("fail"):
            self.failed.append("bench:ringmaster_fp32")
        for ours, theirs in (("ringmaster_bf16", "torch_eager_bf16_sdpa"),
                             ("ringmaster_bf16", "torch_compile_bf16_sdpa"),
                             ("ringmaster_fp32", "torch_eager_fp32")):
            a, c = r[ours].get("samples_per_s"), r[theirs].get("samples_per_s")
            if a and c:
                r[f"ratio_{ours}_vs_{theirs}"] = a / c
        return r

    def find_sanitizer(self):
        for c in [shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer",
                  "/usr/local/cuda/compute-sanitizer/compute-sanitizer"] + \
                sorted(glob.glob("/usr/local/cuda*/compute-sanitizer/compute-sanitizer")) + \
                sorted(glob.glob("/opt/nvidia/**/compute-sanitizer", recursive=True)):
            if c and os.path.isfile(c) and os.access(c, os.X_OK):
                return c
        return None

    def run_sanitizers(self, budget):
        if self.emulated:
            return {"status": "skipped: emulator build (compute-sanitizer checks GPU code; the "
                              "emulator's own detectors ran in the tests stage)"}
        cs = self.find_sanitizer()
        if cs is None:
            self.log("  compute-sanitizer is absent on this machine: stage skipped")
            return {"status": "skipped: compute-sanitizer absent"}
        end = now() + budget
        r = {"compute_sanitizer": cs, "runs": []}
        bins = {t["bin"] for t in self.manifest["tests"]}
        for tool, b, cap in plan.SANITIZER_PLAN:
            if b not in bins:
                continue
            t = plan.item_budget(cap, end - now(), self.emulated)
            if t is None:
                r["runs"].append({"tool": tool, "test": b,
                                  "status": "not run: its time box does not fit in the budget"})
                continue
            name = f"sanitizer-{tool}-{b}"
            xml = os.path.join(self.details, f"gtest-{name}.xml")
            cmd = [cs, "--tool", tool, "--error-exitcode", "86", "--print-limit", "30",
                   self.bin(b), f"--gtest_output=xml:{xml}"]
            rc, secs, to, text = self.sh(cmd, t, name)
            m = re.search(r"ERROR SUMMARY: (\d+) error", text)
            h = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, "
                          r"(\d+) warnings?\)", text)
            row = {"tool": tool, "test": b, "exit": rc, "seconds": round(secs, 1),
                   "errors": int(m.group(1)) if m else None, "gtest": self.gtest_counts(xml)}
            if h:
                row["hazards"], row["errors"], row["warnings"] = map(int, h.groups())
            row["status"] = ("timeout" if to else "skipped (77: no device)" if rc == 77
                             else "clean" if rc == 0 and not row["errors"]
                             else f"errors (exit {rc})")
            if row["status"].startswith("errors"):
                self.failed.append(f"sanitizers:{tool}:{b}")
                self.log("\n".join("    " + l for l in text.splitlines()[-20:]))
            r["runs"].append(row)
            self.log(f"  {tool} {b}: {row['status']} in {secs:.0f}s")
        return r

    def run_finetune(self, budget):
        f, m = self.shapes["finetune"], self.shapes["model"]
        if budget < 20:
            return {"status": "skipped: no time left"}
        rows = sum(1 for _ in open(os.path.join(self.bundle, "data", "sst2", "train.tsv"))) - 1
        bf16 = self.result["stages"].get("bench", {}).get("ringmaster_bf16", {})
        precision = "bf16" if bf16.get("status") == "pass" else "fp32"
        data = {"train": os.path.join(self.bundle, "data", "sst2", "train.tsv"),
                "eval": os.path.join(self.bundle, "data", "sst2", "dev.tsv"),
                "seq": f["seq"], "batch": f["batch"]}
        job = self.write_job("finetune", m, data,
                             f"epochs: {f['epochs']}, lr: {f['lr']}, warmup_ratio: 0.06", precision)
        total_steps = f["epochs"] * math.ceil(rows / f["batch"])
        r = self.run_trainer("finetune", job, budget - 2,
                             done=lambda steps, evals: len(evals) >= f["epochs"])
        text = r.pop("_text")
        steps = r.pop("_steps")
        r.update({"rows": rows, "epochs": f["epochs"], "batch": f["batch"], "seq": f["seq"],
                  "precision": precision, "total_steps": total_steps})
        if steps:
            ks = sorted(steps)
            r["train_s_first_to_last_step"] = round(steps[ks[-1]][0] - steps[ks[0]][0], 2)
            spp = self.rate(steps, min(5, len(ks) - 2)) if len(ks) > 2 else None
            if spp:
                r["step_ms"] = spp * 1e3
                r["projected_train_s"] = round(spp * total_steps, 1)
        if r["evals"]:
            r["dev_accuracy"] = r["evals"][-1]["accuracy"]
        if r["exit"] == 0 and len(r["evals"]) >= f["epochs"]:
            r["status"] = "pass"
        elif r["timed_out"]:
            r["status"] = (f"time box hit after {r['steps_done']} of {total_steps} steps "
                           "(figures projected)")
        else:
            r["status"] = f"fail (exit {r['exit']})"
            self.failed.append("finetune")
            self.log("\n".join("    " + l for l in text.splitlines()[-15:]))
        return r

    # ---- driver -------------------------------------------------------------------------------
    def main(self):
        self.stages = [s for s in STAGE_ORDER if s in self.args.stages.split(",")]
        self.log(f"gpu-check ({self.result['mode']}): stages {','.join(self.stages)}, budget "
                 f"{self.args.budget}s, bundle {self.manifest.get('commit')}")
        if self.emulated:
            self.log("EMULATOR REHEARSAL: every figure below is from the CPU emulator and is not "
                     "a performance figure")
        ok = self.setup()
        fns = {"tests": self.run_tests, "engine": self.run_engine, "gelu": self.run_gelu,
               "kernels": self.run_kernels,
               "bench": self.run_bench, "sanitizers": self.run_sanitizers,
               "finetune": self.run_finetune}
        for s in STAGE_ORDER:
            if s not in self.stages:
                self.result["stages"][s] = {"status": "not requested"}
                continue
            if not ok:
                self.result["stages"][s] = {"status": "skipped: the bundle does not load"}
                continue
            budget = self.stage_budget(s)
            if budget < 5:
                self.result["stages"][s] = {"status": "skipped: no time left"}
                self.log(f"== {s}: skipped (no time left)")
                continue
            self.log(f"== {s} (up to {budget:.0f}s)")
            t0 = now()
            try:
                self.result["stages"][s] = fns[s](budget)
            except Exception as e:  # a broken stage must not lose the others' results
                self.result["stages"][s] = {"status": f"fail (error in the script: {e!r})"}
                self.failed.append(s)
                self.log(f"  ERROR in stage {s}: {e!r}")
            self.result["stages"][s]["stage_seconds"] = round(now() - t0, 1)
            self.write()
        if not ok:
            self.failed.append("setup")
        self.result["failed"] = self.failed
        self.result["total_seconds"] = round(now() - self.start, 1)
        self.write()
        self.summary()
        with tarfile.open(os.path.join(self.out, "details.tgz"), "w:gz") as tar:
            tar.add(self.details, arcname="details")
        shutil.rmtree(self.details)
        return 1 if self.failed else 0

    def write(self):
        with open(os.path.join(self.out, "gpu-check.json"), "w") as f:
            json.dump(self.result, f, indent=1, default=str)

    def summary(self):
        st = self.result["stages"]
        self.log("== summary" + (" (EMULATOR REHEARSAL, not performance figures)"
                                 if self.emulated else ""))
        t = st.get("tests", {}).get("tests", [])
        if t:
            n_pass = sum(1 for x in t if x.get("status") == "pass")
            self.log(f"tests: {n_pass}/{len(t)} pass; "
                     + ", ".join(f"{x['name']}={x['status']}" for x in t if x.get("status") != "pass"))
        e = st.get("engine", {})
        self.log(f"engine: {e.get('status')} max rel loss diff {e.get('max_rel_loss_diff')}")
        g = st.get("gelu", {})
        self.log(f"gelu epilogue: fwd {g.get('gelu_fwd_form')} (erf {g.get('gelu_fwd_max_abs_diff_erf')}"
                 f", tanh {g.get('gelu_fwd_max_abs_diff_tanh')}), dgelu {g.get('dgelu_form')}, "
                 f"tf32 {g.get('tf32_rounding')}")
        k = st.get("kernels", {})
        rows = k.get("kernels", [])
        self.log(f"kernels: {k.get('status')}; {sum(1 for r in rows if r.get('valid'))}/"
                 f"{len(rows)} valid; ceilings {k.get('ceilings')}")
        b = st.get("bench", {})
        for k in ("matmul_bf16_ceiling", "ringmaster_fp32", "ringmaster_bf16", "torch_eager_fp32",
                  "torch_eager_bf16_sdpa", "torch_compile_bf16_sdpa"):
            s = b.get(k)
            if not isinstance(s, dict):
                continue
            figs = [f"{s['samples_per_s']:.1f} samples/s" if "samples_per_s" in s else "",
                    f"{s['tflops']:.0f} TFLOP/s" if "tflops" in s else "",
                    f"MFU {100 * s['mfu_vs_bf16_matmul']:.1f}%" if "mfu_vs_bf16_matmul" in s
                    else "",
                    f"mem {s.get('gpu_mem_process_peak_mib')} MiB"
                    if s.get("gpu_mem_process_peak_mib") else ""]
            self.log(f"bench {k}: {s.get('status')} " + " ".join(x for x in figs if x))
        for k, v in b.items():
            if k.startswith("ratio_"):
                self.log(f"bench {k}: {v:.2f}x")
        sa = st.get("sanitizers", {})
        if "runs" in sa:
            for x in sa["runs"]:
                self.log(f"sanitizer {x['tool']} {x['test']}: {x['status']}")
        else:
            self.log(f"sanitizers: {sa.get('status')}")
        f = st.get("finetune", {})
        self.log(f"finetune: {f.get('status')} steps {f.get('steps_done')}/{f.get('total_steps')}"
                 f" train {f.get('train_s_first_to_last_step')}s (projected "
                 f"{f.get('projected_train_s')}s) wall {f.get('wall_s')}s dev accuracy "
                 f"{f.get('dev_accuracy')}")
        self.log(f"failed: {self.failed or 'nothing'}; total {self.result['total_seconds']}s")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", required=True, help="the unpacked bundle")
    p.add_argument("--out", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--budget", type=float, default=470)
    p.add_argument("--stages", default=",".join(STAGE_ORDER))
    p.add_argument("--emulate", action="store_true")
    p.add_argument("--tiny", action="store_true",
                   help="the rehearsal's tiny shapes on a GPU too (a smoke test, no figures)")
    args = p.parse_args()
    unknown = set(args.stages.split(",")) - set(STAGE_ORDER)
    if unknown:
        sys.exit(f"gpu_check_run: unknown stages {sorted(unknown)}; known: {STAGE_ORDER}")
    sys.exit(Runner(args).main())


if __name__ == "__main__":
    main()
