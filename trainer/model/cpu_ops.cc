#include "trainer/model/cpu_ops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "trainer/model/cpu_kernels.h"
#include "trainer/model/op_profile.h"

namespace ringmaster::trainer::cpu {
namespace {

inline void BlasGemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                     const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void BlasGemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                     const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Column sums of a [N, H] matrix added into out[H]; threads reduce private partials.
template <typename T>
void AddColumnSums(const T* x, T* out, int N, int H) {
  prof::Scope scope(prof::Op::kBiasGrad);
  const int threads = std::min(omp_get_max_threads(), std::max(1, N / 64));
  std::vector<T> partial(static_cast<size_t>(threads) * H, T(0));
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().column_sums(x, partial.data(), threads, N, H);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) {
      T* acc = partial.data() + static_cast<size_t>(t) * H;
      const int begin = static_cast<int>(static_cast<int64_t>(N) * t / threads);
      const int end = static_cast<int>(static_cast<int64_t>(N) * (t + 1) / threads);
      for (int i = begin; i < end; ++i) {
        const T* row = x + static_cast<size_t>(i) * H;
#pragma omp simd
        for (int j = 0; j < H; ++j) acc[j] += row[j];
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* acc = partial.data() + static_cast<size_t>(t) * H;
    for (int j = 0; j < H; ++j) out[j] += acc[j];
  }
}

}  // namespace

template <typename T>
void Gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
          int ldb, T beta, T* C, int ldc) {
  BlasGemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void LinearForward(const T* x, const T* W, const T* b, T* y, int N, int in, int out) {
  prof::Scope scope(prof::Op::kGemm);
  if (b != nullptr) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i) std::copy(b, b + out, y + static_cast<size_t>(i) * out);
  }
  BlasGemm(false, true, N, out, in, T(1), x, in, W, in, b != nullptr ? T(1) : T(0), y, out);
}

template <typename T>
void LinearBackward(const T* dy, const T* x, const T* W, T* dx, T* dW, T* db, int N, int in,
                    int out, bool accumulate_dx) {
  prof::Scope scope(prof::Op::kGemm);
  if (dx != nullptr) {
    BlasGemm(false, false, N, in, out, T(1), dy, out, W, in, accumulate_dx ? T(1) : T(0), dx, in);
  }
  BlasGemm(true, false, out, in, N, T(1), dy, out, x, in, T(1), dW, in);
  if (db != nullptr) AddColumnSums(dy, db, N, out);
}

template <typename T>
void LayerNormForward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* rstd, int N,
                      int H, T eps) {
  prof::Scope scope(prof::Op::kLayerNorm);
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().layer_norm_fwd(x, gamma, beta, y, mean, rstd, N, H, eps);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* xi = x + static_cast<size_t>(i) * H;
    T* yi = y + static_cast<size_t>(i) * H;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < H; ++j) sum += xi[j];
    const T m = sum / H;
    T var = 0;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < H; ++j) var += (xi[j] - m) * (xi[j] - m);
    const T r = T(1) / std::sqrt(var / H + eps);
#pragma omp simd
    for (int j = 0; j < H; ++j) yi[j] = (xi[j] - m) * r * gamma[j] + beta[j];
    mean[i] = m;
    rstd[i] = r;
  }
}

template <typename T>
void LayerNormBackward(const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, T* dx,
                       T* dgamma, T* dbeta, int N, int H) {
  prof::Scope scope(prof::Op::kLayerNorm);
  const int threads = std::min(omp_get_max_threads(), std::max(1, N / 32));
  std::vector<T> partial(static_cast<size_t>(threads) * 2 * H, T(0));
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().layer_norm_bwd(dy, x, gamma, mean, rstd, dx, partial.data(), threads, N, H);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) {
      T* pg = partial.data() + static_cast<size_t>(t) * 2 * H;
      T* pb = pg + H;
      const int begin = static_cast<int>(static_cast<int64_t>(N) * t / threads);
      const int end = static_cast<int>(static_cast<int64_t>(N) * (t + 1) / threads);
      for (int i = begin; i < end; ++i) {
        const T* xi = x + static_cast<size_t>(i) * H;
        const T* dyi = dy + static_cast<size_t>(i) * H;
        T* dxi = dx + static_cast<size_t>(i) * H;
        const T m = mean[i], r = rstd[i];
        T sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
        for (int j = 0; j < H; ++j) {
          const T xhat = (xi[j] - m) * r;
          const T dxhat = dyi[j] * gamma[j];
          sum_dxhat += dxhat;
          sum_dxhat_xhat += dxhat * xhat;
          pg[j] += dyi[j] * xhat;
          pb[j] += dyi[j];
        }
        const T a = sum_dxhat / H, b = sum_dxhat_xhat / H;
#pragma omp simd
        for (int j = 0; j < H; ++j) {
          const T xhat = (xi[j] - m) * r;
          dxi[j] = (dyi[j] * gamma[j] - a - xhat * b) * r;
        }
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* pg = partial.data() + static_cast<size_t>(t) * 2 * H;
    for (int j = 0; j < H; ++j) {
      dgamma[j] += pg[j];
      dbeta[j] += pg[H + j];
    }
  }
}

template <typename T>
void GeluForward(const T* x, T* y, size_t n) {
  prof::Scope scope(prof::Op::kGelu);
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().gelu_fwd(x, y, n);
    return;
  }
  const T inv_sqrt2 = T(0.70710678118654752440);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * inv_sqrt2));
}

template <typename T>
void GeluBackward(const T* dy, const T* x, T* dx, size_t n) {
  prof::Scope scope(prof::Op::kGelu);
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().gelu_bwd(dy, x, dx, n);
    return;
  }
  const T inv_sqrt2 = T(0.70710678118654752440);
  const T inv_sqrt_2pi = T(0.39894228040143267794);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T cdf = T(0.5) * (T(1) + std::erf(x[i] * inv_sqrt2));
    const T pdf = inv_sqrt_2pi * std::exp(T(-0.5) * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

template <typename T>
void DropoutForward(T* x, T* mask, size_t n, float p, uint64_t seed) {
  prof::Scope scope(prof::Op::kDropout);
  if (p <= 0.0f) return;
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().dropout_fwd(x, mask, n, p, seed);
    return;
  }
  const T scale = T(1) / (T(1) - T(p));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const T m = UniformAt(seed, i) >= p ? scale : T(0);
    mask[i] = m;
    x[i] *= m;
  }
}

template <typename T>
void DropoutBackward(T* dx, const T* mask, size_t n, float p) {
  prof::Scope scope(prof::Op::kDropout);
  if (p <= 0.0f) return;
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().mul(dx, mask, n);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) dx[i] *= mask[i];
}

template <typename T>
void MaskedSoftmaxForward(T* scores, const T* bias, int S, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().softmax_fwd(scores, bias, S, scale);
    return;
  }
  for (int i = 0; i < S; ++i) {
    T* row = scores + static_cast<size_t>(i) * S;
    T mx = -std::numeric_limits<T>::infinity();
    for (int j = 0; j < S; ++j) {
      row[j] = row[j] * scale + bias[j];
      mx = std::max(mx, row[j]);
    }
    T sum = 0;
    for (int j = 0; j < S; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int j = 0; j < S; ++j) row[j] *= inv;
  }
}

template <typename T>
void MaskedSoftmaxBackward(const T* probs, T* dprobs, int S, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    ActiveKernels().softmax_bwd(probs, dprobs, S, scale);
    return;
  }
  for (int i = 0; i < S; ++i) {
    const T* p = probs + static_cast<size_t>(i) * S;
    T* d = dprobs + static_cast<size_t>(i) * S;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < S; ++j) dot += p[j] * d[j];
#pragma omp simd
    for (int j = 0; j < S; ++j) d[j] = p[j] * (d[j] - dot) * scale;
  }
}

#define RM_INSTANTIATE(T)                                                                          \
  template void Gemm<T>(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, int);   \
  template void LinearForward<T>(const T*, const T*, const T*, T*, int, int, int);                 \
  template void LinearBackward<T>(const T*, const T*, const T*, T*, T*, T*, int, int, int, bool);  \
  template void LayerNormForward<T>(const T*, const T*, const T*, T*, T*, T*, int, int, T);        \
  template void LayerNormBackward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, \
                                     int, int);                                                    \
  template void GeluForward<T>(const T*, T*, size_t);                                              \
  template void GeluBackward<T>(const T*, const T*, T*, size_t);                                   \
  template void DropoutForward<T>(T*, T*, size_t, float, uint64_t);                                \
  template void DropoutBackward<T>(T*, const T*, size_t, float);                                   \
  template void MaskedSoftmaxForward<T>(T*, const T*, int, T);                                     \
  template void MaskedSoftmaxBackward<T>(const T*, T*, int, T);

RM_INSTANTIATE(float)
RM_INSTANTIATE(double)
#undef RM_INSTANTIATE

}  // namespace ringmaster::trainer::cpu
