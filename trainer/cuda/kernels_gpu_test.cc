// ctest-labels: gpu
// Each CUDA kernel against its CPU reference (tolerance atol + |ref|·rtol). Skips cleanly
// (exit 77 through GTEST_SKIP + the ctest skip code) where no GPU exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "trainer/cuda/kernels.h"
#include "trainer/model/cpu_ops.h"

namespace ringmaster::trainer {
namespace {

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceBuffer {
  float* p = nullptr;
  explicit DeviceBuffer(const std::vector<float>& host) {
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  std::vector<float> Download(size_t n) const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

std::vector<float> Random(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void ExpectClose(const std::vector<float>& ref, const std::vector<float>& got, float atol,
                 float rtol) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], atol + rtol * std::abs(ref[i])) << "at " << i;
  }
}

TEST(CudaKernels, Gelu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 1 << 20;
  const std::vector<float> x = Random(n, 3.0f, 1), dy = Random(n, 1.0f, 2);
  std::vector<float> y(n), dx(n);
  cpu::GeluForward<float>(x.data(), y.data(), n);
  cpu::GeluBackward<float>(dy.data(), x.data(), dx.data(), n);
  DeviceBuffer dx_dev(x), ddy(dy), out(n), grad(n);
  ASSERT_EQ(cuda::GeluForward(dx_dev.p, out.p, n, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::GeluBackward(ddy.p, dx_dev.p, grad.p, n, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose(y, out.Download(n), 1e-6f, 1e-5f);
  ExpectClose(dx, grad.Download(n), 1e-6f, 1e-5f);
}

TEST(CudaKernels, LayerNormForward) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  for (int H : {32, 100, 768, 1024}) {
    const int N = 257;
    const std::vector<float> x = Random(static_cast<size_t>(N) * H, 2.0f, 3);
    const std::vector<float> g = Random(H, 1.0f, 4), b = Random(H, 1.0f, 5);
    std::vector<float> y(x.size()), mean(N), rstd(N);
    cpu::LayerNormForward<float>(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(),
                                 N, H, 1e-12f);
    DeviceBuffer dx(x), dg(g), db(b), dy(x.size()), dm(N), dr(N);
    ASSERT_EQ(cuda::LayerNormForward(dx.p, dg.p, db.p, dy.p, dm.p, dr.p, N, H, 1e-12f, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(y, dy.Download(x.size()), 1e-5f, 1e-4f);
    ExpectClose(mean, dm.Download(N), 1e-6f, 1e-5f);
    ExpectClose(rstd, dr.Download(N), 1e-6f, 1e-4f);
  }
}

}  // namespace
}  // namespace ringmaster::trainer
