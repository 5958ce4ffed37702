// ctest-labels: gpu
// Each CUDA kernel against its CPU reference (tolerance atol + |ref|·rtol). Skips cleanly
// (exit 77 through GTEST_SKIP + the ctest skip code) where no GPU exists.
//
// Tolerances on a real GPU (gpu_test_tolerance.h): the same as the emulator's, each chosen with
// room for what a GPU changes. The kernels are this project's, so the emulator already runs
// their summation trees (warp shuffles, block sums, two-stage column sums) in the GPU's order;
// what differs is elementwise: CUDA's erff/expf/tanhf/rsqrtf (2 ulp) against the CPU
// reference's (GELU's erf and softmax's exp are the CPU engine's vectorised approximations,
// absolute error <= 2.3e-7 for |x| <= 3, trainer/model/cpu_kernels*; the rest glibc's, 1 ulp),
// and nvcc's FMA contraction (<= 1 ulp per contracted a·b + c). A few ulp is < 1e-6 relative,
// under every rtol below (1e-6 .. 1e-3) by at least 3x: GELU and its derivative (erff, expf;
// 1e-5), LayerNorm (rsqrtf; 1e-4), softmax (expf; 1e-4), cross-entropy (expf; 1e-5), AdamW
// (sqrtf and division correctly rounded without fast math; ~10 roundings of an update that
// is ~lr of |p|, 1e-5), clipping (one multiply; 1e-6). The gradient norm's 1e-12 holds too:
// it sums float squares in double, and a float's square is exact in double, so contraction
// cannot change a term, and the tree is the kernel's own.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "jobspec/bert_config.h"
#include "trainer/cuda/device_array.h"
#include "trainer/cuda/kernels/counter_rng.cuh"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/model/bert_params.h"
#include "trainer/model/cpu_half.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/optim/adamw.h"

namespace ringmaster::trainer {
bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

namespace {

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

TEST(CudaKernels, LayerNormBackward) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  for (int H : {32, 100, 768}) {
    for (int N : {1, 63, 257}) {
      const size_t NH = static_cast<size_t>(N) * H;
      const std::vector<float> x = Random(NH, 2.0f, 6), dy = Random(NH, 1.0f, 7);
      const std::vector<float> g = Random(H, 1.0f, 8), b = Random(H, 1.0f, 9);
      const std::vector<float> g0 = Random(H, 1.0f, 10), b0 = Random(H, 1.0f, 11);
      std::vector<float> y(NH), mean(N), rstd(N), dx(NH), dg = g0, dbeta = b0;
      cpu::LayerNormForward<float>(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(),
                                   N, H, 1e-12f);
      cpu::LayerNormBackward<float>(dy.data(), x.data(), g.data(), mean.data(), rstd.data(),
                                    dx.data(), dg.data(), dbeta.data(), N, H);
      DeviceBuffer ddy(dy), dxin(x), dgam(g), dmean(mean), drstd(rstd), ddx(NH), ddg(g0), ddb(b0),
          scratch(cuda::LayerNormBackwardScratchFloats(N, H));
      ASSERT_EQ(cuda::LayerNormBackward(ddy.p, dxin.p, dgam.p, dmean.p, drstd.p, ddx.p, ddg.p,
                                        ddb.p, scratch.p, N, H, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ExpectClose(dx, ddx.Download(NH), 1e-4f, 1e-3f);
      ExpectClose(dg, ddg.Download(H), 1e-3f, 1e-4f);
      ExpectClose(dbeta, ddb.Download(H), 1e-3f, 1e-4f);
    }
  }
}

TEST(CudaKernels, MaskedSoftmax) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 3, NH = 4;
  for (int S : {7, 37, 128}) {
    const size_t n = static_cast<size_t>(B) * NH * S * S;
    const std::vector<float> scores = Random(n, 3.0f, 12), dp = Random(n, 1.0f, 13);
    // Key padding: the last b+1 keys of batch b are masked with the model's lowest() bias.
    std::vector<float> bias(static_cast<size_t>(B) * S, 0.0f);
    for (int b = 0; b < B; ++b) {
      for (int s = std::max(1, S - b - 1); s < S; ++s) {
        bias[static_cast<size_t>(b) * S + s] = std::numeric_limits<float>::lowest();
      }
    }
    const float scale = 1.0f / std::sqrt(16.0f);
    std::vector<float> probs = scores, dscores = dp;
    for (int bh = 0; bh < B * NH; ++bh) {
      const size_t off = static_cast<size_t>(bh) * S * S;
      cpu::MaskedSoftmaxForward<float>(probs.data() + off, bias.data() + (bh / NH) * S, S, scale);
      cpu::MaskedSoftmaxBackward<float>(probs.data() + off, dscores.data() + off, S, scale);
    }
    DeviceBuffer ds(scores), dbias(bias), ddp(dp);
    ASSERT_EQ(cuda::MaskedSoftmaxForward(ds.p, dbias.p, B, NH, S, scale, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::MaskedSoftmaxBackward(ds.p, ddp.p, B, NH, S, scale, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(probs, ds.Download(n), 1e-6f, 1e-4f);
    ExpectClose(dscores, ddp.Download(n), 1e-6f, 1e-4f);
  }
}

TEST(CudaKernels, CounterRngMatchesCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = (1 << 20) + 17;
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0xdeadbeefcafef00dULL}}) {
    const uint64_t first = seed == 42 ? (uint64_t{1} << 33) : 0;
    DeviceBuffer out(n);
    ASSERT_EQ(cuda::UniformFill(out.p, n, seed, first, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = out.Download(n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], cpu::UniformAt(seed, first + i)) << "seed " << seed << " at " << i;
      ASSERT_EQ(cuda::UniformAt(seed, first + i), cpu::UniformAt(seed, first + i));
    }
  }
}

TEST(CudaKernels, Dropout) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = (1 << 18) + 5;
  for (float p : {0.0f, 0.1f, 0.5f}) {
    const std::vector<float> x = Random(n, 1.0f, 14), d = Random(n, 1.0f, 15);
    const std::vector<float> mask0(n, -7.0f);
    std::vector<float> y = x, mask = mask0, dx = d;
    cpu::DropoutForward<float>(y.data(), mask.data(), n, p, 1234);
    cpu::DropoutBackward<float>(dx.data(), mask.data(), n, p);
    DeviceBuffer dy(x), dm(mask0), ddx(d);
    ASSERT_EQ(cuda::DropoutForward(dy.p, dm.p, n, p, 1234, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::DropoutBackward(ddx.p, dm.p, n, p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // Identical masks, and one fp32 multiply each: exact.
    EXPECT_EQ(mask, dm.Download(n));
    EXPECT_EQ(y, dy.Download(n));
    EXPECT_EQ(dx, ddx.Download(n));
  }
}

TEST(CudaKernels, AdamW) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = 16;
  c.num_labels = 3;
  const ParamLayout layout = MakeBertParamLayout(c);
  const size_t n = layout.total;
  std::vector<uint8_t> decay(n, 0);
  for (const ParamSpec& s : layout.specs) {
    std::fill(decay.begin() + s.offset, decay.begin() + s.offset + s.numel, s.weight_decay);
  }
  AdamWOptions opt;
  opt.weight_decay = 0.05;
  AdamW ref(layout, opt);
  std::vector<float> params = Random(n, 0.5f, 16);
  DeviceBuffer dparams(params), dm(std::vector<float>(n, 0.0f)), dv(std::vector<float>(n, 0.0f));
  DeviceArray<uint8_t> dmask(decay);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = Random(n, 0.1f, 16 + step);
    const double lr = 1e-3 * step;
    ref.Step(params.data(), g.data(), lr);
    DeviceBuffer dg(g);
    ASSERT_EQ(cuda::AdamWStep(dparams.p, dg.p, dm.p, dv.p, dmask.p, n, ref.step(), lr, opt.beta1,
                              opt.beta2, opt.eps, opt.weight_decay, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(params, dparams.Download(n), 1e-7f, 1e-5f);
    ExpectClose(ref.exp_avg(), dm.Download(n), 1e-9f, 1e-5f);
    ExpectClose(ref.exp_avg_sq(), dv.Download(n), 1e-12f, 1e-5f);
  }
}

TEST(CudaKernels, Embedding) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 3, S = 11, H = 40, V = 20, T = 2, pad = 0;
  const size_t N = static_cast<size_t>(B) * S;
  std::mt19937 rng(17);
  std::vector<int32_t> ids(N), types(N);
  for (size_t r = 0; r < N; ++r) {
    ids[r] = static_cast<int32_t>(rng() % V);  // includes the padding id and repeats
    types[r] = static_cast<int32_t>(rng() % T);
  }
  const std::vector<float> word = Random(static_cast<size_t>(V) * H, 1.0f, 18);
  const std::vector<float> pos = Random(static_cast<size_t>(S) * H, 1.0f, 19);
  const std::vector<float> type = Random(static_cast<size_t>(T) * H, 1.0f, 20);
  const std::vector<float> d = Random(N * H, 1.0f, 21);
  const std::vector<float> gw0 = Random(word.size(), 1.0f, 22), gp0 = Random(pos.size(), 1.0f, 23),
                           gt0 = Random(type.size(), 1.0f, 24);
  // Reference: the loops of BertModel::Forward/Backward.
  std::vector<float> out(N * H), gw = gw0, gp = gp0, gt = gt0;
  for (size_t r = 0; r < N; ++r) {
    const int s = static_cast<int>(r % S);
    for (int j = 0; j < H; ++j) {
      out[r * H + j] = word[static_cast<size_t>(ids[r]) * H + j] +
                       pos[static_cast<size_t>(s) * H + j] +
                       type[static_cast<size_t>(types[r]) * H + j];
      if (ids[r] != pad) gw[static_cast<size_t>(ids[r]) * H + j] += d[r * H + j];
      gp[static_cast<size_t>(s) * H + j] += d[r * H + j];
      gt[static_cast<size_t>(types[r]) * H + j] += d[r * H + j];
    }
  }
  DeviceArray<int32_t> dids(ids), dtypes(types);
  DeviceBuffer dword(word), dpos(pos), dtype(type), dout(N * H), dd(d), dgw(gw0), dgp(gp0),
      dgt(gt0);
  ASSERT_EQ(
      cuda::EmbeddingForward(dids.p, dtypes.p, dword.p, dpos.p, dtype.p, dout.p, B, S, H, nullptr),
      cudaSuccess);
  ASSERT_EQ(cuda::EmbeddingBackward(dd.p, dids.p, dtypes.p, dgw.p, dgp.p, dgt.p, B, S, H, T, pad,
                                    nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose(out, dout.Download(N * H), 1e-6f, 1e-6f);
  ExpectClose(gw, dgw.Download(gw.size()), 1e-5f, 1e-5f);
  ExpectClose(gp, dgp.Download(gp.size()), 1e-5f, 1e-5f);
  ExpectClose(gt, dgt.Download(gt.size()), 1e-4f, 1e-5f);
  // Null token types mean all zeros.
  std::vector<float> out0(N * H);
  for (size_t r = 0; r < N; ++r) {
    for (int j = 0; j < H; ++j) {
      out0[r * H + j] = word[static_cast<size_t>(ids[r]) * H + j] +
                        pos[static_cast<size_t>(r % S) * H + j] + type[j];
    }
  }
  ASSERT_EQ(
      cuda::EmbeddingForward(dids.p, nullptr, dword.p, dpos.p, dtype.p, dout.p, B, S, H, nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose(out0, dout.Download(N * H), 1e-6f, 1e-6f);
}

TEST(CudaKernels, ClassificationLoss) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 9;
  const float loss_weight = 0.75f;
  for (int C : {1, 2, 5}) {
    const std::vector<float> logits = Random(static_cast<size_t>(B) * C, 3.0f, 25 + C);
    std::vector<float> labels(B);
    std::mt19937 rng(30 + C);
    for (float& l : labels) {
      l = C == 1 ? std::normal_distribution<float>(0.0f, 2.0f)(rng) : static_cast<float>(rng() % C);
    }
    // Reference: BertModel::Forward/Backward's loss and dlogits.
    std::vector<float> losses(B), dlogits(static_cast<size_t>(B) * C);
    for (int b = 0; b < B; ++b) {
      const float* z = logits.data() + static_cast<size_t>(b) * C;
      float* dz = dlogits.data() + static_cast<size_t>(b) * C;
      if (C == 1) {
        const float d = z[0] - labels[b];
        losses[b] = d * d;
        dz[0] = 2.0f * (z[0] - labels[b]) * loss_weight / B;
      } else {
        const float mx = *std::max_element(z, z + C);
        float sum = 0;
        for (int k = 0; k < C; ++k) sum += std::exp(z[k] - mx);
        losses[b] = std::log(sum) + mx - z[static_cast<int>(labels[b])];
        for (int k = 0; k < C; ++k) dz[k] = std::exp(z[k] - mx) / sum * loss_weight / B;
        dz[static_cast<int>(labels[b])] -= loss_weight / B;
      }
    }
    DeviceBuffer dlog(logits), dlab(labels), dloss(B), dgrad(dlogits.size());
    ASSERT_EQ(cuda::ClassificationLossForward(dlog.p, dlab.p, dloss.p, B, C, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::ClassificationLossBackward(dlog.p, dlab.p, dgrad.p, B, C, loss_weight, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(losses, dloss.Download(B), 1e-5f, 1e-5f);
    ExpectClose(dlogits, dgrad.Download(dlogits.size()), 1e-7f, 1e-5f);
  }
}

TEST(CudaKernels, GradNormAndClip) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  // 2^20 + 123: 1025 blocks' worth, so the partial kernel runs at its 1024-block cap and its
  // grid-stride loop goes round 4 times with a ragged tail (2^22 did the same 16 times, for 48 s
  // more of CI under the race check).
  for (size_t n : {size_t{1}, size_t{1000}, (size_t{1} << 20) + 123}) {
    const std::vector<float> g = Random(n, 0.01f, 40);
    const double ref_norm = GradNorm(g.data(), n);
    DeviceBuffer dg(g);
    DeviceArray<double> scratch(cuda::GradNormScratchDoubles(n)), norm(1);
    ASSERT_EQ(cuda::GradNorm(dg.p, n, scratch.p, norm.p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double first = norm.Download()[0];
    EXPECT_NEAR(first, ref_norm, 1e-12 * ref_norm);
    // Deterministic: a second run gives the same bits.
    ASSERT_EQ(cuda::GradNorm(dg.p, n, scratch.p, norm.p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(norm.Download()[0], first);
    // The sum of squares alone (a rank's part of a norm across shards): the same reduction.
    ASSERT_EQ(cuda::GradSumSquares(dg.p, n, scratch.p, norm.p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double sum = norm.Download()[0];
    EXPECT_NEAR(sum, ref_norm * ref_norm, 1e-12 * ref_norm * ref_norm);
    EXPECT_EQ(std::sqrt(sum), first);
    // Clip below the norm (scales), above it (no-op) and disabled.
    for (double max_norm : {0.5 * ref_norm, 2.0 * ref_norm, 0.0}) {
      std::vector<float> clipped = g;
      const double before = ClipGradNorm(clipped.data(), n, max_norm);
      DeviceBuffer dc(g);
      ASSERT_EQ(cuda::ClipGradNorm(dc.p, n, max_norm, scratch.p, norm.p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_NEAR(norm.Download()[0], before, 1e-12 * before);
      ExpectClose(clipped, dc.Download(n), 0.0f, 1e-6f);
    }
  }
}

// The casts against the bit-level references of cpu_half.h on random values of every magnitude
// fp16 and bf16 meet, plus the edges: exact ties both ways, the fp16 overflow threshold (65504
// stays, 65520 rounds to inf), subnormals, signed zeros, infinities and NaN.
TEST(CudaKernels, CastToBf16AndFp16) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          1.0f + std::ldexp(1.0f, -8),      // bf16 tie, even below: 1
                          1.0f + 3 * std::ldexp(1.0f, -8),  // bf16 tie, even above
                          1.0f + std::ldexp(1.0f, -11),     // fp16 tie: 1
                          1.0f + 3 * std::ldexp(1.0f, -11),
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          -70000.0f,
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -26),
                          std::ldexp(1.0f, -14) * 0.75f,
                          3.0e38f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 20);
  for (int i = 0; i < 20000; ++i) x.push_back(std::ldexp(mant(rng), expo(rng)));
  const size_t n = x.size();
  DeviceBuffer dx(x);
  __nv_bfloat16* bf = nullptr;
  __half* hf = nullptr;
  ASSERT_EQ(cudaMalloc(&bf, n * sizeof(*bf)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&hf, n * sizeof(*hf)), cudaSuccess);
  ASSERT_EQ(cuda::CastToBf16(dx.p, bf, n, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::CastToFp16(dx.p, hf, n, nullptr), cudaSuccess);
  std::vector<uint16_t> got_bf(n), got_hf(n);
  ASSERT_EQ(cudaMemcpy(got_bf.data(), bf, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_hf.data(), hf, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(bf), cudaFree(hf);
  int fp16_inf = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {  // any NaN encoding
      EXPECT_TRUE(std::isnan(cpu::Bf16ToFloat(got_bf[i]))) << "bf16 of NaN";
      EXPECT_TRUE(std::isnan(cpu::Fp16ToFloat(got_hf[i]))) << "fp16 of NaN";
      continue;
    }
    ASSERT_EQ(got_bf[i], cpu::Bf16Bits(x[i])) << "bf16 of " << x[i] << " at " << i;
    ASSERT_EQ(got_hf[i], cpu::Fp16Bits(x[i])) << "fp16 of " << x[i] << " at " << i;
    if (std::isinf(cpu::Fp16ToFloat(got_hf[i])) && !std::isinf(x[i])) ++fp16_inf;
  }
  // The references themselves on the edges (so a shared mistake cannot pass).
  EXPECT_EQ(cpu::Bf16ToFloat(cpu::Bf16Bits(x[3])), 1.0f);
  EXPECT_EQ(cpu::Bf16ToFloat(cpu::Bf16Bits(x[4])), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(x[5])), 1.0f);
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(x[6])), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(65504.0f)), 65504.0f);
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(cpu::Fp16ToFloat(cpu::Fp16Bits(65520.0f))));
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(std::ldexp(1.0f, -25))), 0.0f);  // tie to even 0
  EXPECT_EQ(cpu::Fp16ToFloat(cpu::Fp16Bits(std::ldexp(3.0f, -26))), std::ldexp(1.0f, -24));
  EXPECT_EQ(cpu::Fp16Bits(-0.0f), 0x8000);
  EXPECT_GE(fp16_inf, 4);  // 65520, -70000, 3e38 and random values beyond 2^16
}

TEST(CudaKernels, ScaleInPlace) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> x = Random(1000, 100.0f, 40);
  DeviceBuffer d(x);
  ASSERT_EQ(cuda::ScaleInPlace(d.p, x.size(), 1.0f / 1024, nullptr), cudaSuccess);
  const std::vector<float> got = d.Download(x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i] / 1024) << i;
}

}  // namespace
}  // namespace ringmaster::trainer

// Without a CUDA device the whole binary reports "skipped" to CTest (exit 77, the test's
// SKIP_RETURN_CODE) instead of a row of passes that checked nothing.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!ringmaster::trainer::HaveGpu()) {
    std::fprintf(stderr, "kernels_gpu_test: no CUDA device; skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
