// ctest-labels: gpu;emulated
// The emulator's device built-ins against values computed independently on the host: warp
// shuffles and votes, block counts, atomics across blocks, bf16/half conversions (round to
// nearest even, as the hardware's cvt.rn), 2D/3D blocks and grids with dynamic shared memory,
// math intrinsics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda_emu/builtins_kernels.h"

namespace cuda_emu_test {
namespace {

template <typename T>
struct Device {
  T* p = nullptr;
  size_t n;
  explicit Device(size_t count, int byte = 0) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, byte, n * sizeof(T)), cudaSuccess);
  }
  explicit Device(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(p); }
  std::vector<T> Get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

TEST(CudaEmuBuiltins, WarpShufflesVotesAndBlockCount) {
  Device<int> out(10 * 32);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(WarpOps(out.p, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  const std::vector<int> h = out.Get();
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(h[0 * 32 + l], 5);
    EXPECT_EQ(h[1 * 32 + l], l < 3 ? l : l - 3);
    EXPECT_EQ(h[2 * 32 + l], l + 3 < 32 ? l + 3 : l);
    EXPECT_EQ(h[3 * 32 + l], l ^ 1);
    EXPECT_EQ(h[4 * 32 + l], l ^ 4);
    EXPECT_EQ(static_cast<unsigned>(h[5 * 32 + l]), ballot);
    EXPECT_EQ(h[6 * 32 + l], 1);
    EXPECT_EQ(h[7 * 32 + l], 0);
    EXPECT_EQ(h[8 * 32 + l], 16);
    EXPECT_EQ(h[9 * 32 + l], (l % 8) * 100 + l / 8);
  }
}

TEST(CudaEmuBuiltins, AtomicsAcrossBlocks) {
  Device<int> counters(3);
  Device<float> fsum(1);
  Device<double> dsum(1);
  ASSERT_EQ(Atomics(counters.p, fsum.p, dsum.p), cudaSuccess);
  const std::vector<int> c = counters.Get();
  EXPECT_EQ(c[0], 256);
  EXPECT_EQ(c[1], 255);
  EXPECT_EQ(c[2], 256);
  EXPECT_EQ(fsum.Get()[0], 256.0f);
  EXPECT_EQ(dsum.Get()[0], 128.0);
}

// bf16 of a finite float, rounded to nearest even: the upper 16 bits after adding 0x7fff plus
// the lowest kept bit.
float Bf16RoundTrip(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  float y;
  memcpy(&y, &b, 4);
  return y;
}

TEST(CudaEmuBuiltins, Bf16AndHalfRoundToNearestEven) {
  std::vector<float> in = {
      1.0f + 0x1p-8f,      1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-8f, 1.0f + 0x1p-11f,
      1.0f + 3 * 0x1p-11f, 65520.0f,           1e-8f,           3e-8f};
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1e4f, 1e4f);
  while (in.size() < 200) in.push_back(u(g));
  Device<float> din(in), bf(in.size()), half(in.size());
  ASSERT_EQ(Conversions(din.p, bf.p, half.p, static_cast<int>(in.size())), cudaSuccess);
  const std::vector<float> b = bf.Get(), h = half.Get();
  EXPECT_EQ(b[0], 1.0f);            // a tie rounds to the even neighbour (down)
  EXPECT_EQ(b[1], 1.0f + 0x1p-6f);  // a tie rounds to the even neighbour (up)
  EXPECT_EQ(b[2], -1.0f);
  EXPECT_EQ(h[3], 1.0f);
  EXPECT_EQ(h[4], 1.0f + 0x1p-9f);
  EXPECT_EQ(h[5], std::numeric_limits<float>::infinity());  // rounds past 65504
  EXPECT_EQ(h[6], 0.0f);
  EXPECT_EQ(h[7], 0x1p-24f);  // the smallest subnormal half
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(b[i], Bf16RoundTrip(in[i])) << in[i];
}

TEST(CudaEmuBuiltins, ThreeDimensionalBlocksWithDynamicSharedMemory) {
  Device<int> out(6 * 16, 0xff);
  ASSERT_EQ(Shapes(out.p), cudaSuccess);
  const std::vector<int> h = out.Get();
  for (int blk = 0; blk < 6; ++blk) {
    for (int t = 0; t < 16; ++t) EXPECT_EQ(h[blk * 16 + t], t) << blk;
  }
}

TEST(CudaEmuBuiltins, MathIntrinsics) {
  std::vector<float> x;
  for (int i = 1; i <= 64; ++i) x.push_back(0.1f * static_cast<float>(i));
  Device<float> dx(x), out(5 * x.size());
  ASSERT_EQ(Math(dx.p, out.p, static_cast<int>(x.size())), cudaSuccess);
  const std::vector<float> h = out.Get();
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    EXPECT_NEAR(h[5 * i + 0], std::exp(v), 1e-6 * std::exp(v));
    EXPECT_NEAR(h[5 * i + 1], 1.0 / std::sqrt(v), 1e-6);
    EXPECT_NEAR(h[5 * i + 2], std::erf(v), 1e-6);
    EXPECT_NEAR(h[5 * i + 3], v / 3.0, 1e-6);
    EXPECT_NEAR(h[5 * i + 4], v * v + 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace cuda_emu_test
