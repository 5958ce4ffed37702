// CPU kernels of the BERT layers, fp32 for training and fp64 for gradient checks.
// These are also the reference the CUDA kernels are tested against.
//
// Dimension letters: N rows (batch * seq), H hidden, I intermediate, S seq, D head dim.
// Matrices are row-major. Linear weights are stored [out, in] as in PyTorch: y = x·Wᵀ + b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringmaster::trainer::cpu {

// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, through OpenBLAS.
template <typename T>
void Gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
          int ldb, T beta, T* C, int ldc);

// y[N,out] = x[N,in]·Wᵀ + b (b may be null).
template <typename T>
void LinearForward(const T* x, const T* W, const T* b, T* y, int N, int in, int out);

// dx[N,in] (+)= dy·W; dW[out,in] += dyᵀ·x; db[out] += Σ_rows dy. dx may be null;
// `accumulate_dx` adds into dx instead of overwriting.
template <typename T>
void LinearBackward(const T* dy, const T* x, const T* W, T* dx, T* dW, T* db, int N, int in,
                    int out, bool accumulate_dx = false);

// LayerNorm over the last dimension. Saves mean and rstd per row for backward.
template <typename T>
void LayerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int N,
                      int H, T eps);
// dx = LN'(dy) (overwrites), dgamma/dbeta accumulate.
template <typename T>
void LayerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, T* dx,
                       T* dgamma, T* dbeta, int N, int H);

// Exact GELU: x·Φ(x) = 0.5·x·(1 + erf(x/√2)).
template <typename T>
void GeluForward(const T* x, T* y, size_t n);
// dx = dy · GELU'(x) (overwrites).
template <typename T>
void GeluBackward(const T* dy, const T* x, T* dx, size_t n);

// A counter-based uniform in [0,1): the same (seed, index) gives the same value whatever the
// thread split, so dropout masks are reproducible and need no stored RNG state.
inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline float UniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(Mix64(seed ^ Mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

// Inverted dropout in place: keeps with probability 1-p and scales by 1/(1-p). Writes the
// keep mask (0 or 1/(1-p)) into `mask` for backward. p == 0 → identity, mask untouched.
template <typename T>
void DropoutForward(T* x, T* mask, size_t n, float p, uint64_t seed);
template <typename T>
void DropoutBackward(T* dx, const T* mask, size_t n, float p);

// Row softmax of scale·scores + additive mask bias for one (batch, head): scores[S,S] in
// place → probabilities. bias[S] is added to every row (key padding mask).
template <typename T>
void MaskedSoftmaxForward(T* scores, const T* bias, int S, T scale);
// dscores = P ⊙ (dP − rowsum(dP ⊙ P)) · scale (overwrites dP with dscores).
template <typename T>
void MaskedSoftmaxBackward(const T* probs, T* dprobs, int S, T scale);

}  // namespace ringmaster::trainer::cpu
