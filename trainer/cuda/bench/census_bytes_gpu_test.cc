// The step census's declared kernel costs (kernel_cost.h) against the device bytes each kernel
// actually touches, at small shapes: the kernels here are the racecheck build (every load,
// store and atomic reaches the emulator), and the emulator collects the distinct bytes each
// kernel read and wrote (emu/census.h, TakeTouched). A declaration must equal what was touched,
// or bound it from above where the kernel's data make it touch less (stated per case).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "cuda_emu/census.h"
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/bias_grad.h"
#include "trainer/cuda/kernels/flash_attention.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

template <typename T>
T* Device(const std::vector<T>& host) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return d;
}
std::vector<float> Values(size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 0.4f;
  return v;
}

// Runs `launch` with touch recording on and compares, per kernel name, the census's declared
// bytes with the bytes touched. Kernels in `bounded` may touch less than declared.
template <typename F>
void ExpectDeclaredMatchesTouched(const std::string& what, F launch,
                                  const std::set<std::string>& bounded = {}) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cuda_emu::CensusReset();
  cuda_emu::TakeTouched();
  cuda_emu::SetTouchRecording(true);
  ASSERT_EQ(launch(), cudaSuccess) << what;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  cuda_emu::SetTouchRecording(false);
  const cuda_emu::Census c = cuda_emu::CensusSnapshot();
  std::map<std::string, cuda_emu::TouchedBytes> touched = cuda_emu::TakeTouched();
  ASSERT_FALSE(c.kernels.empty()) << what << ": no launch counted";
  for (const auto& [name, k] : c.kernels) {
    SCOPED_TRACE(what + " / " + name);
    EXPECT_EQ(k.declared, k.launches) << "a launch without a declared cost";
    const cuda_emu::TouchedBytes t = touched[name];
    EXPECT_GT(t.bytes_read + t.bytes_written, 0) << "nothing touched: not the racecheck build?";
    if (bounded.count(name) != 0) {
      EXPECT_GE(k.bytes_read, t.bytes_read);
      EXPECT_GE(k.bytes_written, t.bytes_written);
    } else {
      EXPECT_EQ(k.bytes_read, t.bytes_read);
      EXPECT_EQ(k.bytes_written, t.bytes_written);
    }
  }
}

TEST(CensusBytes, Elementwise) {
  const size_t n = 700;
  float* x = Device(Values(n));
  float* y = Device(Values(n));
  float* z = Device(Values(n));
  float* mask = Device(std::vector<float>(n));
  __nv_bfloat16* b16 = nullptr;
  __half* f16 = nullptr;
  ASSERT_EQ(cudaMalloc(&b16, n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&f16, n * 2), cudaSuccess);
  ExpectDeclaredMatchesTouched("gelu forward", [&] { return GeluForward(x, y, n, nullptr); });
  ExpectDeclaredMatchesTouched("gelu backward", [&] { return GeluBackward(y, x, z, n, nullptr); });
  ExpectDeclaredMatchesTouched("dropout forward",
                               [&] { return DropoutForward(z, mask, n, 0.1f, 5, nullptr); });
  ExpectDeclaredMatchesTouched("dropout backward",
                               [&] { return DropoutBackward(y, mask, n, 0.1f, nullptr); });
  ExpectDeclaredMatchesTouched("uniform fill", [&] { return UniformFill(z, n, 3, 0, nullptr); });
  ExpectDeclaredMatchesTouched("cast bf16", [&] { return CastToBf16(x, b16, n, nullptr); });
  ExpectDeclaredMatchesTouched("cast fp16", [&] { return CastToFp16(x, f16, n, nullptr); });
  ExpectDeclaredMatchesTouched("scale", [&] { return ScaleInPlace(x, n, 0.5f, nullptr); });
  ExpectDeclaredMatchesTouched("tanh forward", [&] { return TanhForward(x, y, n, nullptr); });
  ExpectDeclaredMatchesTouched("tanh backward", [&] { return TanhBackward(z, y, x, n, nullptr); });
  ExpectDeclaredMatchesTouched("multiply", [&] { return Multiply(x, y, z, n, nullptr); });
  ExpectDeclaredMatchesTouched("add in place", [&] { return AddInPlace(z, x, n, nullptr); });
  for (void* p : std::vector<void*>{x, y, z, mask, b16, f16}) cudaFree(p);
}

TEST(CensusBytes, LayerNormSoftmaxAttention) {
  const int N = 12, H = 64, B = 2, NH = 2, S = 8, D = 16;
  float* x = Device(Values(size_t{N} * H));
  float* dy = Device(Values(size_t{N} * H, 0.02f));
  float* y = Device(std::vector<float>(size_t{N} * H));
  float* gamma = Device(Values(H));
  float* beta = Device(Values(H));
  float* mean = Device(std::vector<float>(N));
  float* rstd = Device(std::vector<float>(N));
  float* dgamma = Device(std::vector<float>(H));
  float* dbeta = Device(std::vector<float>(H));
  float* scratch = Device(std::vector<float>(LayerNormBackwardScratchFloats(N, H)));
  ExpectDeclaredMatchesTouched("layernorm forward", [&] {
    return LayerNormForward(x, gamma, beta, y, mean, rstd, N, H, 1e-12f, nullptr);
  });
  ExpectDeclaredMatchesTouched("layernorm backward", [&] {
    return LayerNormBackward(dy, x, gamma, mean, rstd, y, dgamma, dbeta, scratch, N, H, nullptr);
  });
  const size_t scores_n = size_t{B} * NH * S * S;
  float* scores = Device(Values(scores_n));
  float* dscores = Device(Values(scores_n, 0.03f));
  float* bias = Device(std::vector<float>(size_t{B} * S, 0.0f));
  ExpectDeclaredMatchesTouched("softmax forward", [&] {
    return MaskedSoftmaxForward(scores, bias, B, NH, S, 0.25f, nullptr);
  });
  ExpectDeclaredMatchesTouched("softmax backward", [&] {
    return MaskedSoftmaxBackward(scores, dscores, B, NH, S, 0.25f, nullptr);
  });
  float* amask = Device(std::vector<float>(scores_n));
  float* dropped = Device(std::vector<float>(scores_n));
  ExpectDeclaredMatchesTouched("attention dropout", [&] {
    return AttentionDropoutForward(scores, amask, dropped, B * NH, S, 0.1f, 9, nullptr);
  });
  // Rows of ld = 3·NH·D (the fused QKV output): only the head's columns are read.
  const int64_t ld = 3 * NH * D;
  float* rows = Device(Values(size_t{B} * S * ld));
  float* heads = Device(std::vector<float>(size_t{B} * NH * S * D));
  ExpectDeclaredMatchesTouched("rows to heads",
                               [&] { return RowsToHeads(rows, ld, heads, B, S, NH, D, nullptr); });
  ExpectDeclaredMatchesTouched("heads to rows",
                               [&] { return HeadsToRows(heads, rows, ld, B, S, NH, D, nullptr); });
  for (void* p : std::vector<void*>{x, dy, y, gamma, beta, mean, rstd, dgamma, dbeta, scratch,
                                    scores, dscores, bias, amask, dropped, rows, heads}) {
    cudaFree(p);
  }
}

// The fused attention on the model's layout: Q, K, V in place in (N, 3H) rows (all of it read),
// the context and its gradient as (N, H) rows, dQ/dK/dV into (N, 3H) rows; S = 70 spans two
// tiles of 64, with key padding and dropout. The backward's two kernels are declared apiece.
TEST(CensusBytes, FlashAttention) {
  const int B = 2, S = 70, NH = 2, D = 8, H = NH * D;
  const size_t N = size_t{B} * S, rows = size_t{B} * NH * S;
  float* qkv = Device(Values(N * 3 * H));
  std::vector<float> host_bias(N, 0.0f);
  for (int j = 60; j < S; ++j) host_bias[S + j] = -3.0e38f;
  float* bias = Device(host_bias);
  float* out = Device(std::vector<float>(N * H));
  float* dout = Device(Values(N * H, 0.02f));
  float* stats = Device(std::vector<float>(rows * 2));
  float* dsum = Device(std::vector<float>(rows));
  float* dqkv = Device(std::vector<float>(N * 3 * H));
  FlashAttentionForwardArgs<float> f;
  f.q = qkv, f.k = qkv + H, f.v = qkv + 2 * H, f.ld_qkv = 3 * H, f.mask_bias = bias;
  f.out = out, f.ld_out = H, f.stats = stats, f.B = B, f.S = S, f.NH = NH, f.D = D;
  f.scale = 0.35f, f.dropout_p = 0.1f, f.seed = 5;
  ExpectDeclaredMatchesTouched("flash attention forward",
                               [&] { return FlashAttentionForward(f, nullptr); });
  FlashAttentionBackwardArgs<float> g;
  g.q = f.q, g.k = f.k, g.v = f.v, g.ld_qkv = f.ld_qkv, g.mask_bias = bias, g.out = out;
  g.dout = dout, g.ld_out = H, g.stats = stats, g.dsum = dsum;
  g.dq = dqkv, g.dk = dqkv + H, g.dv = dqkv + 2 * H, g.ld_dqkv = 3 * H;
  g.B = B, g.S = S, g.NH = NH, g.D = D, g.scale = f.scale, g.dropout_p = f.dropout_p;
  g.seed = f.seed;
  ExpectDeclaredMatchesTouched("flash attention backward",
                               [&] { return FlashAttentionBackward(g, nullptr); });
  for (float* p : {qkv, bias, out, dout, stats, dsum, dqkv}) cudaFree(p);
}

TEST(CensusBytes, EmbeddingLossNormBiasAdamW) {
  const int B = 2, S = 6, H = 32, V = 40, T = 2;
  const int N = B * S;
  std::vector<int32_t> ids(N), types(N);
  for (int i = 0; i < N; ++i) {
    ids[i] = 1 + i;  // distinct, none the padding id 0: the declared rows are exact
    types[i] = i % 2;
  }
  int32_t* d_ids = Device(ids);
  int32_t* d_types = Device(types);
  float* word = Device(Values(size_t{V} * H));
  float* pos = Device(Values(size_t{S} * H));
  float* type = Device(Values(size_t{T} * H));
  float* out = Device(std::vector<float>(size_t{N} * H));
  ExpectDeclaredMatchesTouched("embedding forward", [&] {
    return EmbeddingForward(d_ids, d_types, word, pos, type, out, B, S, H, nullptr);
  });
  ExpectDeclaredMatchesTouched("embedding forward, no types", [&] {
    return EmbeddingForward(d_ids, nullptr, word, pos, type, out, B, S, H, nullptr);
  });
  ExpectDeclaredMatchesTouched("embedding backward", [&] {
    return EmbeddingBackward(out, d_ids, d_types, word, pos, type, B, S, H, T, 0, nullptr);
  });
  // Repeated ids: the word rows are a bound (each token's row declared, shared rows touched once).
  std::vector<int32_t> repeated(N, 3);
  int32_t* d_repeated = Device(repeated);
  ExpectDeclaredMatchesTouched("embedding backward, repeated ids",
                               [&] {
                                 return EmbeddingBackward(out, d_repeated, d_types, word, pos, type,
                                                          B, S, H, T, 0, nullptr);
                               },
                               {"EmbeddingWordBackwardKernel"});

  const int C = 3;
  float* logits = Device(Values(size_t{B} * C));
  float* labels = Device(std::vector<float>{0.0f, 2.0f});
  float* losses = Device(std::vector<float>(B));
  float* dlogits = Device(std::vector<float>(size_t{B} * C));
  ExpectDeclaredMatchesTouched("loss forward", [&] {
    return ClassificationLossForward(logits, labels, losses, B, C, nullptr);
  });
  ExpectDeclaredMatchesTouched("loss backward", [&] {
    return ClassificationLossBackward(logits, labels, dlogits, B, C, 1.0f, nullptr);
  });

  const size_t n = 5000;
  float* grads = Device(Values(n));
  double* nscratch = Device(std::vector<double>(GradNormScratchDoubles(n)));
  double* norm = Device(std::vector<double>(1));
  ExpectDeclaredMatchesTouched("grad norm",
                               [&] { return GradNorm(grads, n, nscratch, norm, nullptr); });
  // max_norm far below the norm: the clip kernel scales every gradient.
  ExpectDeclaredMatchesTouched(
      "clip", [&] { return ClipGradNorm(grads, n, 1e-3, nscratch, norm, nullptr); });

  const int rows = 150, cols = 40;
  float* bdy = Device(Values(size_t{rows} * cols));
  float* db = Device(std::vector<float>(cols));
  float* bscratch = Device(std::vector<float>(BiasGradientScratchFloats(rows, cols)));
  for (bool accumulate : {false, true}) {
    ExpectDeclaredMatchesTouched(accumulate ? "bias gradient, accumulate" : "bias gradient", [&] {
      return BiasGradient(bdy, db, bscratch, rows, cols, accumulate, nullptr);
    });
  }

  float* p = Device(Values(n));
  float* m = Device(std::vector<float>(n));
  float* v = Device(std::vector<float>(n));
  std::vector<uint8_t> decay(n);
  for (size_t i = 0; i < n; ++i) decay[i] = i % 3 != 0;
  uint8_t* d_decay = Device(decay);
  ExpectDeclaredMatchesTouched("adamw", [&] {
    return AdamWStep(p, grads, m, v, d_decay, n, 1, 1e-3, 0.9, 0.999, 1e-8, 0.01, nullptr);
  });
  for (void* q : std::vector<void*>{d_ids,  d_types, word,     pos,     type,  out,      d_repeated,
                                    logits, labels,  losses,   dlogits, grads, nscratch, norm,
                                    bdy,    db,      bscratch, p,       m,     v,        d_decay}) {
    cudaFree(q);
  }
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
