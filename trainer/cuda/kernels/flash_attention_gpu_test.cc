// ctest-labels: gpu
// The fused attention kernels (flash_attention.h) against a float64 reference of the
// materialised attention the CPU BertModel computes (scores, masked softmax, dropout with
// cpu::UniformAt's masks, PV; and its backward), on shapes that cover one and several tiles,
// rows past the last tile, head dims padded to the next instance (12 → 16), every instance
// (8 .. 128), key padding, a sequence whose every key is masked, and dropout.
//
// Tolerances (the same under the emulator and on a GPU, gpu_test_tolerance.h): the kernels are
// this project's, so a GPU runs the emulator's summation order (each dot product as kSplit
// interleaved partial sums over d in order, added by warp shuffles in a fixed tree; keys in tile
// order, the forward's rescaling once per chunk of 16 keys); what differs is expf (2 ulp on CUDA, 1
// in glibc) and nvcc's FMA contraction of the few a·b + c the source does not already write as fmaf
// (<= 1 ulp each). Against the float64 reference the error is fp32 rounding of D-term dot products
// (scores, dO·Vᵀ, D = dO·O) and S-term weighted sums (output, gradients), each within a few units
// of fp32's u = 6e-8 of the tensor's scale per term count's square root: measured at most 1.2e-7
// (logsumexp), 4.5e-7 (output) and 5.1e-7 (gradients) of the scale on these shapes (printed).
// A GPU adds a few ulp per element (expf, contraction) on top, not a new summation order.
// Allowed: 1e-6 (logsumexp, relative to max(1, |lse|)), 1e-5 (output) and 2e-5 (gradients)
// of each tensor's largest |value|, 8x to 40x the measured maxima. A wrong mask index, a missing
// scale, a dropout multiplier applied to the sum l, or a transposed tile gives errors of
// O(1e-2 .. 1) of the scale.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/kernels/flash_attention.h"
#include "trainer/model/cpu_ops.h"

namespace ringmaster::trainer {
bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

namespace {

using cuda::FlashAttentionBackward;
using cuda::FlashAttentionBackwardArgs;
using cuda::FlashAttentionForward;
using cuda::FlashAttentionForwardArgs;

struct Shape {
  int B, S, NH, D;
  float p;                 // attention dropout
  std::vector<int> valid;  // per sequence: keys [0, valid) unmasked (S: no padding)
};

std::vector<float> Random(size_t n, float scale, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// Inputs in the model's layout: qkv (N, 3H), bias (B, S), dO (N, H).
struct Problem {
  Shape s;
  int H;
  std::vector<float> qkv, bias, dout;
  uint64_t seed = 0x5eed;
  explicit Problem(const Shape& shape, uint32_t rs) : s(shape), H(shape.NH * shape.D) {
    const size_t N = static_cast<size_t>(s.B) * s.S;
    qkv = Random(N * 3 * H, 0.5f, rs);
    dout = Random(N * H, 1.0f, rs + 1);
    bias.assign(N, 0.0f);
    for (int b = 0; b < s.B; ++b) {
      for (int j = s.valid[b]; j < s.S; ++j) {
        bias[static_cast<size_t>(b) * s.S + j] = std::numeric_limits<float>::lowest();
      }
    }
  }
};

// The float64 reference: out (N, H), lse (BH, S), dqkv (N, 3H).
struct Reference {
  std::vector<double> out, lse, dqkv;
};

Reference Compute(const Problem& pr) {
  const Shape& s = pr.s;
  const int S = s.S, D = s.D, H = pr.H, NH = s.NH;
  const size_t N = static_cast<size_t>(s.B) * S;
  Reference r;
  r.out.assign(N * H, 0.0);
  r.lse.assign(static_cast<size_t>(s.B) * NH * S, 0.0);
  r.dqkv.assign(N * 3 * H, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double keep = s.p > 0 ? 1.0 / (1.0 - static_cast<double>(s.p)) : 1.0;
  std::vector<double> P(static_cast<size_t>(S) * S), M(P.size()), dP(P.size());
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int bh = b * NH + h;
      auto q = [&](int i, int d) {
        return double(pr.qkv[(size_t(b) * S + i) * 3 * H + h * D + d]);
      };
      auto k = [&](int i, int d) {
        return double(pr.qkv[(size_t(b) * S + i) * 3 * H + H + h * D + d]);
      };
      auto v = [&](int i, int d) {
        return double(pr.qkv[(size_t(b) * S + i) * 3 * H + 2 * H + h * D + d]);
      };
      auto dO = [&](int i, int d) { return double(pr.dout[(size_t(b) * S + i) * H + h * D + d]); };
      const uint64_t stream = cpu::Mix64(pr.seed ^ static_cast<uint64_t>(bh));
      for (int i = 0; i < S; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q(i, d) * k(j, d);
          // The bias in float, as the model adds it (lowest() + a score stays lowest()).
          const float bias = pr.bias[size_t(b) * S + j];
          P[i * S + j] = bias == 0.0f ? dot * scale : double(float(dot * scale) + bias);
          mx = std::max(mx, P[i * S + j]);
        }
        double sum = 0;
        for (int j = 0; j < S; ++j) sum += (P[i * S + j] = std::exp(P[i * S + j] - mx));
        for (int j = 0; j < S; ++j) {
          P[i * S + j] /= sum;
          const size_t flat = size_t(i) * S + j;
          M[flat] = s.p > 0 ? (cpu::UniformAt(stream, flat) >= s.p ? keep : 0.0) : 1.0;
        }
        r.lse[size_t(bh) * S + i] = mx + std::log(sum);
        for (int d = 0; d < D; ++d) {
          double o = 0;
          for (int j = 0; j < S; ++j) o += P[i * S + j] * M[i * S + j] * v(j, d);
          r.out[(size_t(b) * S + i) * H + h * D + d] = o;
        }
      }
      // Backward: dP = (dO·Vᵀ) ⊙ M; dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale.
      for (int i = 0; i < S; ++i) {
        double dot = 0;
        for (int j = 0; j < S; ++j) {
          double x = 0;
          for (int d = 0; d < D; ++d) x += dO(i, d) * v(j, d);
          dP[i * S + j] = x * M[i * S + j];
          dot += P[i * S + j] * dP[i * S + j];
        }
        for (int j = 0; j < S; ++j) dP[i * S + j] = P[i * S + j] * (dP[i * S + j] - dot) * scale;
      }
      for (int i = 0; i < S; ++i) {
        for (int d = 0; d < D; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int j = 0; j < S; ++j) {
            dq += dP[i * S + j] * k(j, d);
            dk += dP[j * S + i] * q(j, d);
            dv += P[j * S + i] * M[j * S + i] * dO(j, d);
          }
          const size_t row = (size_t(b) * S + i) * 3 * H + h * D + d;
          r.dqkv[row] = dq;
          r.dqkv[row + H] = dk;
          r.dqkv[row + 2 * H] = dv;
        }
      }
    }
  }
  return r;
}

// Largest |got − want| relative to the tensor's largest |want| (columns [c0, c0 + w) of rows of
// width ld).
double ScaledError(const std::vector<float>& got, const std::vector<double>& want, size_t ld,
                   size_t c0, size_t w) {
  double err = 0, scale = 0;
  for (size_t r = 0; r < want.size() / ld; ++r) {
    for (size_t c = c0; c < c0 + w; ++c) {
      scale = std::max(scale, std::abs(want[r * ld + c]));
      const double e = std::abs(double(got[r * ld + c]) - want[r * ld + c]);
      err = std::max(err, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    }
  }
  return err / std::max(scale, 1e-30);
}

void RunAndCompare(const Shape& shape, uint32_t seed) {
  const Problem pr(shape, seed);
  const Reference ref = Compute(pr);
  const int B = shape.B, S = shape.S, NH = shape.NH, D = shape.D, H = pr.H;
  const size_t N = static_cast<size_t>(B) * S, BH = static_cast<size_t>(B) * NH;
  DeviceArray<float> qkv(pr.qkv), bias(pr.bias), dout(pr.dout);
  DeviceArray<float> out(N * H), stats(BH * S * 2), dsum(BH * S), dqkv(N * 3 * H);
  FlashAttentionForwardArgs<float> f;
  f.q = qkv.p, f.k = qkv.p + H, f.v = qkv.p + 2 * H, f.ld_qkv = 3 * H;
  f.mask_bias = bias.p;
  f.out = out.p, f.ld_out = H, f.stats = stats.p;
  f.B = B, f.S = S, f.NH = NH, f.D = D;
  f.scale = 1.0f / std::sqrt(static_cast<float>(D));
  f.dropout_p = shape.p, f.seed = pr.seed;
  ASSERT_EQ(FlashAttentionForward(f, nullptr), cudaSuccess);
  FlashAttentionBackwardArgs<float> g;
  g.q = f.q, g.k = f.k, g.v = f.v, g.ld_qkv = f.ld_qkv, g.mask_bias = f.mask_bias;
  g.out = out.p, g.dout = dout.p, g.ld_out = H, g.stats = stats.p, g.dsum = dsum.p;
  g.dq = dqkv.p, g.dk = dqkv.p + H, g.dv = dqkv.p + 2 * H, g.ld_dqkv = 3 * H;
  g.B = B, g.S = S, g.NH = NH, g.D = D, g.scale = f.scale, g.dropout_p = f.dropout_p;
  g.seed = f.seed;
  ASSERT_EQ(FlashAttentionBackward(g, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> o = out.Download(), st = stats.Download(), dg = dqkv.Download();
  const double e_out = ScaledError(o, ref.out, H, 0, H);
  double e_lse = 0;
  for (size_t r = 0; r < BH * S; ++r) {
    const double lse = double(st[2 * r]) + std::log(double(st[2 * r + 1]));
    e_lse = std::max(e_lse, std::abs(lse - ref.lse[r]) / std::max(1.0, std::abs(ref.lse[r])));
  }
  const double e_dq = ScaledError(dg, ref.dqkv, 3 * H, 0, H);
  const double e_dk = ScaledError(dg, ref.dqkv, 3 * H, H, H);
  const double e_dv = ScaledError(dg, ref.dqkv, 3 * H, 2 * H, H);
  std::printf(
      "B=%d S=%d NH=%d D=%d p=%.2f: scaled max errors out %.2e lse %.2e dQ %.2e dK %.2e "
      "dV %.2e\n",
      B, S, NH, D, shape.p, e_out, e_lse, e_dq, e_dk, e_dv);
  EXPECT_LT(e_out, 1e-5);
  EXPECT_LT(e_lse, 1e-6);
  EXPECT_LT(e_dq, 2e-5);
  EXPECT_LT(e_dk, 2e-5);
  EXPECT_LT(e_dv, 2e-5);
}

// One tile, the smallest instance, no padding or dropout.
TEST(FlashAttention, OneTileNoMask) { RunAndCompare({2, 8, 2, 8, 0.0f, {8, 8}}, 1); }

// D = 12 runs the 16 instance (zero padding); key padding and dropout; a sequence whose every key
// is masked (the CPU's uniform row).
TEST(FlashAttention, PaddedHeadDimPaddingDropoutAllMasked) {
  RunAndCompare({3, 11, 2, 12, 0.1f, {11, 6, 0}}, 2);
}

// Two tiles of 64 (S = 70: the second has 6 rows), head dim 32, padding inside the second tile.
TEST(FlashAttention, TwoTilesPaddingDropout) { RunAndCompare({1, 70, 2, 32, 0.1f, {67}}, 3); }

// BERT-base's head dim over three tiles (S = 130), heavier dropout and padding in the first tile.
TEST(FlashAttention, HeadDim64ThreeTiles) { RunAndCompare({2, 130, 1, 64, 0.2f, {130, 50}}, 4); }

// The 128 instance (tiles of 32 rows): S = 40 over two tiles.
TEST(FlashAttention, HeadDim128) { RunAndCompare({1, 40, 2, 128, 0.1f, {33}}, 5); }

// Dropout changes the result (the regenerated masks are applied, not skipped), and the same seed
// reproduces it bit for bit.
TEST(FlashAttention, DropoutIsAppliedAndReproducible) {
  const Shape shape{1, 16, 2, 8, 0.3f, {16}};
  const Problem pr(shape, 6);
  const int H = pr.H;
  const size_t N = 16;
  DeviceArray<float> qkv(pr.qkv), o1(N * H), o2(N * H), o3(N * H), stats(2 * 2 * N);
  FlashAttentionForwardArgs<float> f;
  f.q = qkv.p, f.k = qkv.p + H, f.v = qkv.p + 2 * H, f.ld_qkv = 3 * H;
  f.ld_out = H, f.stats = stats.p, f.B = 1, f.S = 16, f.NH = 2, f.D = 8, f.scale = 0.35f;
  f.seed = 99;
  f.dropout_p = 0.3f, f.out = o1.p;
  ASSERT_EQ(FlashAttentionForward(f, nullptr), cudaSuccess);
  f.out = o2.p;
  ASSERT_EQ(FlashAttentionForward(f, nullptr), cudaSuccess);
  f.dropout_p = 0.0f, f.out = o3.p;
  ASSERT_EQ(FlashAttentionForward(f, nullptr), cudaSuccess);
  const std::vector<float> a = o1.Download(), b = o2.Download(), c = o3.Download();
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - c[i])));
  EXPECT_GT(diff, 1e-2);
}

TEST(FlashAttention, InvalidShapesLaunchNothing) {
  FlashAttentionForwardArgs<float> f;
  f.B = 1, f.S = 4, f.NH = 1, f.D = 8, f.ld_qkv = 24, f.ld_out = 8;
  for (int d : {0, 129}) {
    FlashAttentionForwardArgs<float> bad = f;
    bad.D = d, bad.ld_qkv = 3 * 129, bad.ld_out = 129;
    EXPECT_EQ(FlashAttentionForward(bad, nullptr), cudaErrorInvalidValue) << "D=" << d;
  }
  FlashAttentionForwardArgs<float> narrow = f;
  narrow.ld_out = 7;
  EXPECT_EQ(FlashAttentionForward(narrow, nullptr), cudaErrorInvalidValue);
  FlashAttentionForwardArgs<float> p1 = f;
  p1.dropout_p = 1.0f;
  EXPECT_EQ(FlashAttentionForward(p1, nullptr), cudaErrorInvalidValue);
  FlashAttentionBackwardArgs<float> g;
  g.B = 1, g.S = 4, g.NH = 1, g.D = 8, g.ld_qkv = 24, g.ld_out = 8, g.ld_dqkv = 7;
  EXPECT_EQ(FlashAttentionBackward(g, nullptr), cudaErrorInvalidValue);
  EXPECT_FALSE(cuda::FlashAttentionSupported(0));
  EXPECT_TRUE(cuda::FlashAttentionSupported(64));
  EXPECT_FALSE(cuda::FlashAttentionSupported(129));
}

}  // namespace
}  // namespace ringmaster::trainer

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!ringmaster::trainer::HaveGpu()) {
    std::fprintf(stderr, "flash_attention_gpu_test: no CUDA device; skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
