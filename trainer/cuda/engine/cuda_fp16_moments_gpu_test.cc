// ctest-labels: gpu
// fp16 training's optimizer state against fp32's: the AdamW moments (exp_avg, exp_avg_sq) and
// the weights after a few steps of the same data, tensor by tensor. The loss scaler multiplies
// every fp16 gradient by the loss scale (65536 at the start); the step divides it back out
// before clipping and AdamW. AdamW's update m/(√v + eps) is nearly invariant to a constant
// factor on the gradients, so a missing unscale barely moves the weights or the loss; the
// moments, though, are then 65536 (first) and 65536² (second) times too large, and are what a
// checkpoint saves. This test is there to catch that (and a wrong unscale factor generally).
// Skips cleanly (exit 77) where no CUDA device exists.
//
// Tolerances (derived, then checked against what the emulator measures; printed by the test):
//   fp16 keeps an 11-bit significand: unit roundoff u16 = 2^-11 ≈ 4.9e-4. The loss scale is a
//   power of two, and multiplying and dividing by it is exact while nothing overflows or
//   underflows (the scaled gradients of this model are far inside fp16's range; a step that
//   overflowed would be skipped, which the test checks it is not). What differs from fp32 is
//   the rounding of each GEMM operand to fp16: a product of two rounded operands is within
//   2·u16 of the exact one. The first layer's weight gradients carry the roundings of every
//   GEMM behind them (both layers' backward, the head), 54 GEMMs a step: in quadrature
//   √54 · 2·u16 ≈ 7.2e-3 of a tensor's gradient scale, linearly up to 54 · 2·u16 ≈ 5e-2. The
//   first moment is a weighted mean of the steps' gradients (weights summing to <= 1), so it
//   stays within that of its own scale. Measured: 1.5e-2 (layer 0's value weight), between the
//   two. Allowed: 5e-2 of each tensor's scale (max |exp_avg|, floored at a tenth of its layer's,
//   below), the linear bound. The second moment is a mean of g²: an error e on g moves g² by
//   2·|g|·e <= 2·max|g|·e, twice the first moment's relative to max g²: allowed 1e-1
//   (measured 1.3e-3). A missing unscale is off by a factor 65536 (times the clip
//   coefficient): measured 9e2 (exp_avg) and 1e6 (exp_avg_sq) of the scale; a factor 2 wrong
//   would be 1 (and 3) of it: all far outside.
//   Weights: each run moves a weight by at most about lr per step (|m̂/√v̂| <= ~1), so runs
//   that had nothing in common would differ by up to 2·kSteps·lr = 8e-3; the 16-bit rounding
//   flips m̂/√v̂ only where a gradient is within its rounding error of zero. Measured 2.5e-3;
//   allowed 4e-3, half of unrelated. A missing unscale moves them by 4.0e-3 (measured: where
//   |g| is near AdamW's eps, eps stops damping the scaled update), at the bound and not
//   reliably beyond it: the weights are checked so that an unscale "fixed" by breaking the
//   update is caught; the moments catch the scale.
//   Real GPU: the same bounds. cuBLASLt's summation order adds ~2e-4 of the gradient scale
//   (kGpuGradScaleTolerance's 5e-4 at most) to fp32 and fp16 alike, under 1/10 of the bounds
//   above; GpuTolerance(emulated, real_gpu) states both, equal here.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/cuda/testing/gpu_test_batch.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kSteps = 2;
constexpr double kLr = 2e-3;

constexpr double kMomentTol = GpuTolerance(5e-2, 5e-2);
constexpr double kSecondMomentTol = GpuTolerance(1e-1, 1e-1);
constexpr double kWeightTol = GpuTolerance(4e-3, 4e-3);

struct OptimizerState {
  std::vector<float> params, exp_avg, exp_avg_sq;
  std::vector<double> loss_scales;  // per step (0 for fp32)
};

OptimizerState Train(GemmPrecision precision) {
  const BertConfig config = SmallTestConfig();
  const ParamLayout layout = MakeBertParamLayout(config);
  std::vector<float> params(layout.total);
  InitBertParams(config, layout, 11, params.data());
  CudaTrainerOptions options;
  options.precision = precision;
  OptimizerState out;
  auto state = CudaTrainerState::Create(config, layout, params, options);
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok()) return out;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_TRUE((*state)->BeginStep().ok());
    for (int m = 0; m < 2; ++m) {
      const TestMicroBatch mb = MakeTestMicroBatch(config, 100 * step + m, 4);
      absl::StatusOr<float> l = (*state)->ForwardBackward(mb.Inputs(), 0.5f, 7 + 2 * step + m);
      EXPECT_TRUE(l.ok()) << l.status();
    }
    // Clipping on (max norm 1): the clip coefficient is computed from the unscaled norm, so the
    // unscale must come before it.
    absl::StatusOr<StepOutcome> r = (*state)->FinishStep(kLr, 1.0);
    EXPECT_TRUE(r.ok() && !r->skipped && std::isfinite(r->grad_norm)) << "step " << step;
    out.loss_scales.push_back(r.ok() ? r->loss_scale : -1);
  }
  out.params = (*state)->DownloadParams().value_or(std::vector<float>{});
  const absl::Status s = (*state)->DownloadOptimizer(&out.exp_avg, &out.exp_avg_sq);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

struct TensorDiff {
  double worst_relative = 0;  // max over tensors of max|a - b| / max|b|
  std::string worst_tensor;
};

// A tensor's scale: its own max |b|, but at least kUnitFloor of the largest in its unit (layer):
// some gradients are exactly zero in exact arithmetic and pure rounding noise in both runs
// (the attention key bias: softmax ignores a constant added to a row's scores), and that noise
// is relative to the terms that cancelled, the unit's other gradients, not to itself.
constexpr double kUnitFloor = 0.1;

TensorDiff RelativeToScale(const ParamLayout& layout, const std::vector<float>& a,
                           const std::vector<float>& b) {
  std::vector<double> unit_max;
  for (const ParamSpec& spec : layout.specs) {
    if (spec.unit >= static_cast<int>(unit_max.size())) unit_max.resize(spec.unit + 1, 0.0);
    for (size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      unit_max[spec.unit] = std::max<double>(unit_max[spec.unit], std::abs(b[i]));
    }
  }
  TensorDiff d;
  for (const ParamSpec& spec : layout.specs) {
    double diff = 0, scale = kUnitFloor * unit_max[spec.unit];
    for (size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      diff = std::max<double>(diff, std::abs(a[i] - b[i]));
      scale = std::max<double>(scale, std::abs(b[i]));
    }
    if (scale == 0) {
      // A tensor without gradient in both runs (the padding row alone, say): equal or wrong.
      if (diff > 0) d.worst_relative = INFINITY, d.worst_tensor = spec.name;
      continue;
    }
    if (diff / scale > d.worst_relative)
      d.worst_relative = diff / scale, d.worst_tensor = spec.name;
  }
  return d;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max<double>(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST(CudaFp16Moments, AdamWMomentsAndWeightsMatchFp32) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const ParamLayout layout = MakeBertParamLayout(SmallTestConfig());
  const OptimizerState fp32 = Train(GemmPrecision::kFp32);
  const OptimizerState fp16 = Train(GemmPrecision::kFp16);
  ASSERT_EQ(fp32.params.size(), layout.total);
  ASSERT_EQ(fp16.params.size(), layout.total);
  ASSERT_EQ(fp16.exp_avg.size(), layout.total);
  ASSERT_EQ(fp16.exp_avg_sq.size(), layout.total);
  ASSERT_EQ(fp32.exp_avg.size(), layout.total);
  // The scaler ran at its starting scale every step (no overflow, nothing skipped).
  for (double s : fp16.loss_scales) EXPECT_EQ(s, 65536.0);

  const TensorDiff m = RelativeToScale(layout, fp16.exp_avg, fp32.exp_avg);
  const TensorDiff v = RelativeToScale(layout, fp16.exp_avg_sq, fp32.exp_avg_sq);
  const double w = MaxAbsDiff(fp16.params, fp32.params);
  printf(
      "fp16 vs fp32 after %d steps: exp_avg %.2e of its scale (worst %s), exp_avg_sq %.2e "
      "(worst %s), weights %.2e max abs\n",
      kSteps, m.worst_relative, m.worst_tensor.c_str(), v.worst_relative, v.worst_tensor.c_str(),
      w);
  EXPECT_LT(m.worst_relative, kMomentTol) << "exp_avg of " << m.worst_tensor;
  EXPECT_LT(v.worst_relative, kSecondMomentTol) << "exp_avg_sq of " << v.worst_tensor;
  EXPECT_LT(w, kWeightTol);
  // The fp16 path ran: its moments are not fp32's bit for bit.
  EXPECT_GT(m.worst_relative, 0.0);
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
