"""The time plan of scripts/gpu-check.sh's run and its pure decisions (standard library only;
imported by gpu_check_run.py and tested by scripts/gpu_check_plan_test.py).

One device command may run 600 s; the check's default budget is 470 s, the rest being the
preflight, the unpacking and the write-up. The benchmark runs first (the answer most needed) and
every stage's cap, and every item of a stage's own plan, adds up within the budget: a stage gets
at most its cap, minus nothing, as long as the earlier stages kept to theirs; time an earlier
stage leaves unused goes to the fine-tune, which takes whatever is left.
"""

DEFAULT_BUDGET_S = 470
STAGE_ORDER = ["bench", "tests", "engine", "gelu", "kernels", "sanitizers", "finetune"]
# Most seconds a stage may take on a GPU. None: whatever is left (the fine-tune, which reports
# the steps reached and a projection when its time box ends first).
GPU_CAPS = {"bench": 240, "tests": 75, "engine": 40, "gelu": 10, "kernels": 30, "sanitizers": 45,
            "finetune": None}
# The least the fine-tune is kept (the caps of the others leave it this much of the budget).
FINETUNE_MIN_S = 30
# The benchmark's items, in order: (key, most seconds). torch.compile gets the largest share: it
# compiles forward and backward, then warms until its step time is stable.
BENCH_PLAN = [("matmul_bf16_ceiling", 15), ("ringmaster_fp32", 40), ("ringmaster_bf16", 40),
              ("torch_eager_fp32", 30), ("torch_eager_bf16_sdpa", 25),
              ("torch_compile_bf16_sdpa", 90)]
# compute-sanitizer runs, in order: (tool, test binary, most seconds). An item runs only when its
# whole cap fits in what is left of the stage; the rest are reported as not run (a larger
# --budget with --stages sanitizers runs more of them).
SANITIZER_PLAN = [("memcheck", "kernels_gpu_test", 25), ("racecheck", "kernels_gpu_test", 20),
                  ("memcheck", "gemm_gpu_test", 30), ("synccheck", "kernels_gpu_test", 30),
                  ("memcheck", "cuda_trainer_state_gpu_test", 30),
                  ("memcheck", "bert_cuda_gpu_test", 45), ("memcheck", "cuda_engine_gpu_test", 60),
                  ("initcheck", "kernels_gpu_test", 60)]
# The emulator runs the same plan on the CPU with tiny shapes, several times slower per item.
EMU_FACTOR = 6


def cap(stage, emulated):
    c = GPU_CAPS[stage]
    return None if c is None else c * (EMU_FACTOR if emulated else 1)


def stage_budget(stage, stages, remaining, emulated=False):
    """Seconds stage STAGE may take when REMAINING seconds of the budget are left: its cap, cut
    so that the stages after it (of those requested) keep their caps (at GPU scale; the
    fine-tune keeps FINETUNE_MIN_S)."""
    later = STAGE_ORDER[STAGE_ORDER.index(stage) + 1:]
    keep = sum(GPU_CAPS[s] if GPU_CAPS[s] is not None else FINETUNE_MIN_S
               for s in later if s in stages)
    c = cap(stage, emulated)
    left = remaining - keep
    return left if c is None else min(c, left)


def item_budget(item_cap, left, emulated=False):
    """Seconds for one item of a stage's plan with LEFT seconds of the stage left: its whole cap,
    or None (not run) when the cap does not fit, so an item never runs cut short by the plan."""
    c = item_cap * (EMU_FACTOR if emulated else 1)
    if emulated:  # the rehearsal runs every item it can, cut to what is left
        return min(c, left) if left >= 10 else None
    return c if c <= left else None


def test_status(rc, timed_out, gpu_present):
    """(status, failed) of one gpu test binary. Exit 77 means "no CUDA device": a skip on a
    machine without one (the emulator rehearsal, a build host), but a failure of the check on a
    GPU machine, where it says the device is unusable (a driver older than the CUDA runtime
    bundled, a device hidden from the container)."""
    if timed_out:
        return "timeout", True
    if rc == 0:
        return "pass", False
    if rc == 77:
        if gpu_present:
            return ("fail (exit 77: the test found no usable CUDA device on a GPU machine; "
                    "driver older than the bundled CUDA runtime?)"), True
        return "skipped (77: no device)", False
    return f"fail (exit {rc})", True


def version_tuple(v):
    out = []
    for x in str(v or "").split("."):
        if not x.isdigit():
            break
        out.append(int(x))
    return tuple(out)


def needs_carried_glibc(image_glibc, required):
    """True when the image's glibc (e.g. "2.31") is older than the bundle needs (e.g. "2.36")."""
    if not image_glibc or not required:
        return False
    return version_tuple(image_glibc) < version_tuple(required)
