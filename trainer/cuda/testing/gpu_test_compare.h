// Comparisons of the CUDA engine's weights with the CPU engine's, shared by its gtest tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {

// Weights after `steps` AdamW steps against the CPU's. Every weight is within AdamW's step bound
// (4·lr per step) of the CPU's. Under the emulator: within 1e-5 of its tensor's scale (max |w|),
// except a few whose gradient is ~0: AdamW divides a gradient by its own running magnitude, so
// two fp32 implementations that sum in different orders can move such a weight by different
// fractions of lr. Allowed: at most 0.1% of the weights beyond 1e-5. Attention key biases are
// all of that kind: their true gradient is exactly zero (softmax ignores a per-row shift), so
// both engines update them by normalised rounding noise; they get the step bound only.
//
// On a real GPU (gpu_test_tolerance.h) the gradients differ from the CPU's by cuBLAS's summation
// order, rms ε ≈ 2e-5 of each tensor's gradient scale G (≈ √K·u per GEMM with K ≤ 64, over the
// ~20 GEMMs of a 2-layer forward and backward). AdamW's direction r = m̂/(√v̂ + eps) is invariant
// to a gradient's scale, so a weight's error is lr·Δr per step with Δr ≈ 2κ·ε·G/|g| (κ ≈ 2: the
// cancellation in m̂ when g changes sign). It exceeds 5% of an update (Δr > 0.05) only where
// |g| < 2·2·2e-5/0.05·G = 1.6e-3·G; for a roughly Gaussian gradient (G ≈ 4σ over 10³-10⁴
// elements) that is 2·6.4e-3/√(2π) ≈ 0.5% of the weights per step, ≤ 1.5% over 3 steps. So
// the GPU allows 1e-5 of the scale plus 5% of the updates' total (0.05·lr·steps), beyond which
// at most 2% of the weights. What this still catches: a wrong step (lr, bias correction,
// weight decay, eps) or a wrong gradient for a tensor moves most of its weights by a large
// fraction of lr, far beyond 5% on far more than 2%.
inline void ExpectWeightsMatch(const ParamLayout& layout, const std::vector<float>& ref,
                               const std::vector<float>& got, double lr, int steps) {
  const double bulk_lr_share = GpuTolerance(0.0, 0.05);
  const double outlier_share = GpuTolerance(1e-3, 2e-2);
  size_t outliers = 0;
  double worst = 0;
  for (const ParamSpec& s : layout.specs) {
    const bool zero_grad = s.name.find("attention.self.key.bias") != std::string::npos;
    double scale = 1e-12;
    for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    const double bound = 1e-5 * scale + bulk_lr_share * lr * steps;
    for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
      const double diff = std::abs(static_cast<double>(ref[i]) - got[i]);
      ASSERT_LE(diff, 4 * lr * steps) << s.name << "[" << i - s.offset << "] after " << steps;
      if (zero_grad) continue;
      worst = std::max(worst, diff / scale);
      outliers += diff > bound;
    }
  }
  EXPECT_LE(outliers, static_cast<size_t>(outlier_share * static_cast<double>(layout.total)))
      << "weights beyond 1e-5 of their tensor's scale"
      << (kEmulatedGpu ? "" : " plus 5% of the updates");
  printf("after %d steps: %zu of %zu weights beyond the bound (largest %.2g of the scale)\n", steps,
         outliers, layout.total, worst);
}

}  // namespace ringmaster::trainer::cuda
