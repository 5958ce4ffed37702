// Comparisons of the CUDA engine's weights with the CPU engine's, shared by its gtest tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {

// Weights after `steps` AdamW steps against the CPU's. Every weight is within 1e-5 of its
// tensor's scale (max |w|), except a few whose gradient is ~0: AdamW divides a gradient by its
// own running magnitude, so two fp32 implementations that sum in different orders can move such
// a weight by different fractions of lr. Allowed: at most 0.1% of the weights beyond 1e-5, none
// beyond AdamW's step bound (4·lr per step). Attention key biases are all of that kind: their
// true gradient is exactly zero (softmax ignores a per-row shift), so both engines update them by
// normalised rounding noise; they get the step bound only.
inline void ExpectWeightsMatch(const ParamLayout& layout, const std::vector<float>& ref,
                               const std::vector<float>& got, double lr, int steps) {
  size_t outliers = 0;
  double worst = 0;
  for (const ParamSpec& s : layout.specs) {
    const bool zero_grad = s.name.find("attention.self.key.bias") != std::string::npos;
    double scale = 1e-12;
    for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
    }
    for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
      const double diff = std::abs(static_cast<double>(ref[i]) - got[i]);
      ASSERT_LE(diff, 4 * lr * steps) << s.name << "[" << i - s.offset << "] after " << steps;
      if (zero_grad) continue;
      worst = std::max(worst, diff / scale);
      outliers += diff > 1e-5 * scale;
    }
  }
  EXPECT_LE(outliers, layout.total / 1000) << "weights beyond 1e-5 of their tensor's scale";
  printf("after %d steps: %zu of %zu weights beyond 1e-5 relative (largest %.2g)\n", steps,
         outliers, layout.total, worst);
}

}  // namespace ringmaster::trainer::cuda
