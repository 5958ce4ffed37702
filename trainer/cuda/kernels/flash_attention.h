// Fused multi-head attention (issue #28 item 2), FlashAttention-2 style: softmax(scale·QKᵀ +
// key-padding bias), attention dropout, ·V, and its backward, without an S×S tensor in memory.
// The forward streams K/V tiles through shared memory with an online softmax (running row max
// and sum) and saves two floats per query row (the max and the sum: what backward needs to
// recompute P); the backward recomputes P tile by tile and forms dV, dP, dS = P ⊙ (dP − D) with
// D = rowsum(dO ⊙ O), dQ and dK. Attention dropout is regenerated from the counter RNG in both
// passes exactly as AttentionDropoutForward draws it (mask[bh, i·S + j] = UniformAt(Mix64(seed ^
// bh), i·S + j) >= p ? 1/(1-p) : 0), so the masks are the CPU BertModel's, and never stored.
//
// Q, K, V are read in place from the QKV projection's rows (no heads-major copies): head h of
// sequence b, position s is at q[(b·S + s)·ld_qkv + h·D + d] (likewise k, v; for the model's
// (N, 3H) output q = qkv, k = qkv + H, v = qkv + 2H, ld_qkv = 3H). The output and its gradient
// are (N, H)-style rows with ld_out; dQ/dK/dV are written as rows with ld_dqkv.
//
// Element type T (activations): float today; the kernels load with ToFloat, store with FromFloat
// and accumulate in fp32, so bf16/fp16 instantiations can follow item 1 of #28. Only float is
// instantiated (flash_attention.cu).
//
// Letters: B batch, S sequence, NH heads, D head dim, BH = B·NH. Supported: 1 <= D <= 128
// (FlashAttentionSupported); any S >= 1. CPU reference: the materialised path (QKᵀ GEMM,
// MaskedSoftmaxForward, AttentionDropoutForward, PV GEMM) and BertModel's attention; tests in
// flash_attention_gpu_test.cc.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ringmaster::trainer::cuda {

// Whether the fused kernels handle head dim D (instantiated for D up to 8, 16, 32, 64, 128; a
// smaller D runs the next instance with zero padding).
bool FlashAttentionSupported(int head_dim);

template <typename T>
struct FlashAttentionForwardArgs {
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t ld_qkv = 0;
  // (B, S) additive key bias (0 or a large finite negative, e.g. lowest(): not -inf), or null.
  const float* mask_bias = nullptr;
  T* out = nullptr;  // rows (b·S + s)·ld_out + h·D + d
  int64_t ld_out = 0;
  // (BH, S, 2): the row max m of scale·QKᵀ + bias and the row sum l of exp(· − m); logsumexp =
  // m + log(l). Two floats rather than logsumexp: with every key masked (bias lowest()), the CPU
  // gives a uniform row, which m + log(l) cannot represent (it rounds back to m).
  float* stats = nullptr;
  int B = 0, S = 0, NH = 0, D = 0;
  float scale = 1.0f;
  float dropout_p = 0.0f;  // 0 <= p < 1; 0: no dropout
  uint64_t seed = 0;
};

template <typename T>
struct FlashAttentionBackwardArgs {
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t ld_qkv = 0;
  const float* mask_bias = nullptr;
  const T* out = nullptr;  // the forward's output (for D = rowsum(dO ⊙ O))
  const T* dout = nullptr;
  int64_t ld_out = 0;                             // of out and dout
  const float* stats = nullptr;                   // the forward's
  float* dsum = nullptr;                          // (BH, S) scratch: D
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;  // written (not accumulated)
  int64_t ld_dqkv = 0;
  int B = 0, S = 0, NH = 0, D = 0;
  float scale = 1.0f;
  float dropout_p = 0.0f;
  uint64_t seed = 0;  // the forward's
};

// One launch. Invalid shapes (D unsupported, non-positive sizes, ld smaller than NH·D, p outside
// [0, 1)) give cudaErrorInvalidValue and launch nothing.
template <typename T>
cudaError_t FlashAttentionForward(const FlashAttentionForwardArgs<T>& a, cudaStream_t stream);

// Two launches, no atomics (deterministic): a query-parallel kernel writing D and dQ, then a
// key-parallel one writing dK and dV.
template <typename T>
cudaError_t FlashAttentionBackward(const FlashAttentionBackwardArgs<T>& a, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
