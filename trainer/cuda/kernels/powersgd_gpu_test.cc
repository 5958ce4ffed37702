// ctest-labels: gpu
// DevicePowerSgd against the CPU PowerSgd (its reference, trainer/parallel/powersgd.h) over 4
// successive calls (error feedback and the warm-started Q carry over) on a buffer with three
// compressed matrices, one too small to compress, and uncompressed spans between them: the
// reduced gradients within 1e-4 of their scale each call. The all-reduce is the identity (one
// rank) or a doubling (two ranks with the same gradients, which exercises the 1/world in the
// residual). A NaN gradient restarts Q on both. Skips (77) without a CUDA device.
// Tolerance on a real GPU (gpu_test_tolerance.h): the same 1e-4. P = M·Q and Q' = Mᵀ·P are this
// project's kernels (powersgd.cu), not cuBLAS, so the emulator already sums them in the GPU's
// order; a GPU adds only nvcc's FMA contraction, <= 1 ulp per product term, whose effect on a
// sum of K terms is bounded like a change of order (SumOrderBound: < 1e-5 of the scale for
// K <= 256), and the orthonormalisation runs on the host in double either way.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/parallel/device_powersgd.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/parallel/powersgd.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr size_t kTotal = 10000;

std::vector<MatrixRange> Matrices() {
  // 40x60 at 100, 64x30 at 3000, 3x4 at 6000 (too small: exact), 50x50 at 7000.
  return {{100, 40, 60}, {3000, 64, 30}, {6000, 3, 4}, {7000, 50, 50}};
}

std::vector<float> Gradients(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1e-2f);
  std::vector<float> g(kTotal);
  for (float& v : g) v = n(rng);
  return g;
}

void RunBoth(int world, bool poison) {
  PowerSgdOptions options;
  options.rank = 4;
  options.seed = 7;
  PowerSgd cpu(Matrices(), kTotal, options);
  ASSERT_TRUE(cpu.init_status().ok()) << cpu.init_status();
  auto gpu = DevicePowerSgd::Create(Matrices(), kTotal, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->wire_floats_per_call(), cpu.wire_floats_per_call());
  const float factor = static_cast<float>(world);  // every rank holds the same gradients
  auto host_sum = [&](float* d, size_t n) {
    for (size_t i = 0; i < n; ++i) d[i] *= factor;
    return absl::OkStatus();
  };
  auto device_sum = [&](float* d, size_t n) {
    std::vector<float> h(n);
    if (cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
      return absl::InternalError("download");
    }
    for (float& v : h) v *= factor;
    if (cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
      return absl::InternalError("upload");
    }
    return absl::OkStatus();
  };
  for (int call = 0; call < 4; ++call) {
    std::vector<float> g = Gradients(100 + call);
    if (poison && call == 1) g[3000 + 5] = std::numeric_limits<float>::quiet_NaN();
    DeviceArray<float> d(g);
    ASSERT_TRUE(cpu.AllReduce(g.data(), world, host_sum).ok());
    ASSERT_TRUE((*gpu)->AllReduce(d.p, world, device_sum, nullptr).ok());
    const std::vector<float> got = d.Download();
    double scale = 0, worst = 0;
    size_t nan_mismatch = 0;
    for (size_t i = 0; i < kTotal; ++i) {
      if (std::isnan(g[i]) || std::isnan(got[i])) {
        nan_mismatch += std::isnan(g[i]) != std::isnan(got[i]);
        continue;
      }
      scale = std::max(scale, std::abs(static_cast<double>(g[i])));
      worst = std::max(worst, std::abs(static_cast<double>(g[i]) - got[i]));
    }
    EXPECT_EQ(nan_mismatch, 0u) << "call " << call;
    EXPECT_LE(worst, 1e-4 * scale) << "call " << call << " (world " << world << ")";
    EXPECT_GT(scale, 0.0);
  }
}

TEST(DevicePowerSgd, MatchesTheCpuPowerSgdAtOneRank) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  RunBoth(1, false);
}

TEST(DevicePowerSgd, MatchesTheCpuPowerSgdAtTwoRanks) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  RunBoth(2, false);
}

TEST(DevicePowerSgd, ANanGradientRestartsQAsOnTheCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  RunBoth(2, true);
}

TEST(DevicePowerSgd, RefusesWhatTheCpuRefuses) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  PowerSgdOptions options;
  options.rank = 0;
  EXPECT_FALSE(DevicePowerSgd::Create(Matrices(), kTotal, options).ok());
  options.rank = 4;
  EXPECT_FALSE(DevicePowerSgd::Create({{9990, 5, 5}}, kTotal, options).ok());  // past the end
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
