// ctest-labels: gpu
// Three AdamW steps of the CUDA training state against the CPU engine's own pieces (BertModel
// <float>, ClipGradNorm, AdamW) on a small BERT with dropout and two accumulated micro-batches:
// the weights after each step within 1e-5 of each tensor's scale (see ExpectWeightsMatch), the same
// losses and gradient norms, and an exact round trip of the state through the host (checkpoints).
// Tolerances: the emulator's (exact GEMMs) and a real GPU's (cuBLAS's summation order, derived in
// gpu_test_tolerance.h and gpu_test_compare.h) are stated apart.
// Skips cleanly (exit 77) where no CUDA device exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/cuda/testing/gpu_test_batch.h"
#include "trainer/cuda/testing/gpu_test_compare.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"

namespace ringmaster::trainer::cuda {
namespace {

BertConfig SmallConfig() { return SmallTestConfig(); }

// This file's micro-batches: 2 rows of 8 tokens.
TestMicroBatch MakeMicroBatch(const BertConfig& c, uint32_t seed) {
  return MakeTestMicroBatch(c, seed, 2);
}

TEST(CudaTrainerState, ThreeAdamWStepsMatchCpuEngine) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const BertConfig config = SmallConfig();
  const ParamLayout layout = MakeBertParamLayout(config);
  std::vector<float> params(layout.total);
  InitBertParams(config, layout, 5, params.data());
  CudaTrainerOptions options;
  const double max_grad_norm = 0.1;         // low enough that clipping acts
  const double lr = 2e-5;                   // the job spec's default fine-tuning rate
  const float weights[2] = {0.25f, 0.75f};  // micro-batch shares of the step

  std::vector<float> cpu_params = params, cpu_grads(layout.total);
  BertModel<float> cpu(config, layout);
  AdamW adam(layout, options.adam);
  auto gpu = CudaTrainerState::Create(config, layout, params, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  for (int step = 0; step < 3; ++step) {
    std::fill(cpu_grads.begin(), cpu_grads.end(), 0.0f);
    ASSERT_TRUE((*gpu)->BeginStep().ok());
    for (int m = 0; m < 2; ++m) {
      const TestMicroBatch mb = MakeMicroBatch(config, 100 * step + m);
      const uint64_t seed = 1000 + 10 * step + m;
      const float cpu_loss = cpu.Forward(cpu_params.data(), mb.Inputs(), true, seed);
      cpu.Backward(cpu_params.data(), cpu_grads.data(), weights[m]);
      absl::StatusOr<float> loss = (*gpu)->ForwardBackward(mb.Inputs(), weights[m], seed);
      ASSERT_TRUE(loss.ok()) << loss.status();
      // The loss after earlier steps: the weights differ within ExpectWeightsMatch's bound, which
      // on a GPU moves the loss by far less than its own GEMMs' rounding (kGpuLogitTolerance).
      EXPECT_NEAR(*loss, cpu_loss,
                  GpuTolerance(1e-5, kGpuLogitTolerance * std::max(1.0f, std::abs(cpu_loss))))
          << "step " << step << " micro-batch " << m;
    }
    const double cpu_norm = ClipGradNorm(cpu_grads.data(), cpu_grads.size(), max_grad_norm);
    adam.Step(cpu_params.data(), cpu_grads.data(), lr);
    absl::StatusOr<StepOutcome> norm = (*gpu)->FinishStep(lr, max_grad_norm);
    ASSERT_TRUE(norm.ok()) << norm.status();
    EXPECT_NEAR(norm->grad_norm, cpu_norm, GpuTolerance(1e-4, kGpuGradScaleTolerance) * cpu_norm)
        << "step " << step;
    EXPECT_GT(cpu_norm, max_grad_norm) << "the test should exercise clipping";
    absl::StatusOr<std::vector<float>> got = (*gpu)->DownloadParams();
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectWeightsMatch(layout, cpu_params, *got, lr, step + 1);
  }
  EXPECT_EQ((*gpu)->step(), 3);

  // Checkpoint round trip: download, upload into a fresh state, the same bits come back.
  std::vector<float> m, v;
  ASSERT_TRUE((*gpu)->DownloadOptimizer(&m, &v).ok());
  absl::StatusOr<std::vector<float>> p = (*gpu)->DownloadParams();
  ASSERT_TRUE(p.ok());
  auto fresh = CudaTrainerState::Create(config, layout, params, options);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Upload(*p, m, v, 3).ok());
  std::vector<float> m2, v2;
  ASSERT_TRUE((*fresh)->DownloadOptimizer(&m2, &v2).ok());
  EXPECT_EQ(*(*fresh)->DownloadParams(), *p);
  EXPECT_EQ(m2, m);
  EXPECT_EQ(v2, v);
  EXPECT_EQ((*fresh)->step(), 3);
  EXPECT_FALSE((*fresh)->Upload(std::vector<float>(3), m, v, 3).ok());
}

TEST(CudaTrainerState, NonFiniteGradientsAreReportedNotApplied) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const BertConfig config = SmallConfig();
  const ParamLayout layout = MakeBertParamLayout(config);
  std::vector<float> params(layout.total);
  InitBertParams(config, layout, 5, params.data());
  params[layout.Find("classifier.bias")->offset] = std::numeric_limits<float>::infinity();
  auto gpu = CudaTrainerState::Create(config, layout, params, CudaTrainerOptions{});
  ASSERT_TRUE(gpu.ok());
  ASSERT_TRUE((*gpu)->BeginStep().ok());
  const TestMicroBatch mb = MakeMicroBatch(config, 1);
  ASSERT_TRUE((*gpu)->ForwardBackward(mb.Inputs(), 1.0f, 1).ok());
  absl::StatusOr<StepOutcome> norm = (*gpu)->FinishStep(1e-3, 1.0);
  ASSERT_TRUE(norm.ok());
  EXPECT_FALSE(std::isfinite(norm->grad_norm));
  EXPECT_FALSE(norm->skipped);   // fp32: no scaler; the loop fails the step
  EXPECT_EQ((*gpu)->step(), 0);  // nothing applied
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
