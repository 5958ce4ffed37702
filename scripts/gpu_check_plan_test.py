#!/usr/bin/env python3
"""Unit tests of scripts/gpu-check.sh's pure decisions (tests/gpu_check_plan.sh runs them):
the time plan fits one device command, the benchmark goes first, a gpu test that finds no device
on a GPU machine fails the check, the carried glibc is chosen only when the image's is older,
torch.compile's warm-up waits for a stable step time."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench_torch  # noqa: E402  (imports torch only when run)
import gpu_check_plan as plan  # noqa: E402


def walk(stages, budget, used, emulated=False):
    """Runs the plan's stages, each using used(stage, budget) of the seconds it is given;
    returns {stage: seconds given} and the total used."""
    remaining, given, total = budget, {}, 0.0
    for s in plan.STAGE_ORDER:
        if s not in stages:
            continue
        b = plan.stage_budget(s, stages, remaining, emulated)
        given[s] = b
        u = min(b, used(s, b))
        remaining -= u
        total += u
    return given, total


class TimePlan(unittest.TestCase):
    def test_benchmark_first(self):
        self.assertEqual(plan.STAGE_ORDER[0], "bench")

    def test_caps_fit_the_default_budget(self):
        fixed = sum(c for c in plan.GPU_CAPS.values() if c is not None)
        self.assertLessEqual(fixed + plan.FINETUNE_MIN_S, plan.DEFAULT_BUDGET_S)
        # The budget plus preflight, unpacking and write-up fit a 600 s device command.
        self.assertLessEqual(plan.DEFAULT_BUDGET_S + 60, 600)

    def test_each_stage_plan_fits_its_cap(self):
        self.assertLessEqual(sum(c for _, c in plan.BENCH_PLAN), plan.GPU_CAPS["bench"])
        self.assertEqual([k for k, _ in plan.BENCH_PLAN][-1], "torch_compile_bf16_sdpa")
        # The sanitizer items actually run within the stage's cap: each only when whole.
        left, ran = plan.GPU_CAPS["sanitizers"], []
        for tool, b, c in plan.SANITIZER_PLAN:
            t = plan.item_budget(c, left)
            if t is not None:
                ran.append((tool, b))
                left -= t
        self.assertGreaterEqual(left, 0)
        self.assertIn(("memcheck", "kernels_gpu_test"), ran)

    def test_every_stage_using_all_it_gets_stays_within_budget(self):
        given, total = walk(plan.STAGE_ORDER, plan.DEFAULT_BUDGET_S, lambda s, b: b)
        self.assertLessEqual(total, plan.DEFAULT_BUDGET_S + 1e-9)
        for s, c in plan.GPU_CAPS.items():
            if c is not None:
                self.assertEqual(given[s], c, s)  # nobody squeezed: each got its whole cap
        self.assertGreaterEqual(given["finetune"], plan.FINETUNE_MIN_S)

    def test_unused_time_goes_to_the_finetune(self):
        given, _ = walk(plan.STAGE_ORDER, plan.DEFAULT_BUDGET_S, lambda s, b: b / 2)
        self.assertGreater(given["finetune"], plan.FINETUNE_MIN_S + 100)

    def test_a_short_budget_keeps_the_benchmark(self):
        given, total = walk(["bench", "finetune"], 200, lambda s, b: b)
        self.assertEqual(given["bench"], 200 - plan.FINETUNE_MIN_S)
        self.assertLessEqual(total, 200)

    def test_item_never_runs_cut_short_on_a_gpu(self):
        self.assertEqual(plan.item_budget(90, 100), 90)
        self.assertIsNone(plan.item_budget(90, 89))


class TestStatus(unittest.TestCase):
    def test_no_device_on_a_gpu_machine_fails(self):
        status, failed = plan.test_status(77, False, gpu_present=True)
        self.assertTrue(failed)
        self.assertIn("77", status)

    def test_no_device_without_a_gpu_is_a_skip(self):
        self.assertEqual(plan.test_status(77, False, gpu_present=False),
                         ("skipped (77: no device)", False))

    def test_pass_fail_timeout(self):
        self.assertEqual(plan.test_status(0, False, True), ("pass", False))
        self.assertEqual(plan.test_status(1, False, True), ("fail (exit 1)", True))
        self.assertEqual(plan.test_status(0, True, True), ("timeout", True))


class Glibc(unittest.TestCase):
    def test_carried_only_when_older(self):
        self.assertTrue(plan.needs_carried_glibc("2.31", "2.36"))
        self.assertTrue(plan.needs_carried_glibc("2.9", "2.10"))
        self.assertFalse(plan.needs_carried_glibc("2.36", "2.36"))
        self.assertFalse(plan.needs_carried_glibc("2.39", "2.36"))
        self.assertFalse(plan.needs_carried_glibc(None, "2.36"))


class Warmup(unittest.TestCase):
    def test_stable_only_after_the_recompile(self):
        self.assertFalse(gpu_bench_torch.is_stable([0.1, 0.1]))
        self.assertFalse(gpu_bench_torch.is_stable([0.1, 0.1, 3.0]))  # a recompile
        self.assertFalse(gpu_bench_torch.is_stable([0.1, 3.0, 0.1]))
        self.assertTrue(gpu_bench_torch.is_stable([3.0, 0.1, 0.101, 0.1]))


if __name__ == "__main__":
    unittest.main(verbosity=1)
