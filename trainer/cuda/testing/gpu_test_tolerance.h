// Tolerances of the gpu tests: the emulator's and a real GPU's, stated apart.
//
// Under the emulator (CUDA_EMU) the kernels are host C++ on the CPU: the same summation trees as
// on a GPU (warp shuffles, block sums), but libm's erff/expf/tanhf, the host compiler's FMA
// contraction, and the cuBLAS(Lt) stand-in sums every dot product in order in fp32, as the CPU
// reference does. Its results are within a few fp32 roundings of the reference, and the tests'
// emulated tolerances were fitted to that (docs/cuda.md gives the measured margins).
//
// A real GPU adds, without any engine bug:
//   - cuBLAS(Lt)'s summation order: tiles, split-K partial sums and tensor-core fragment sums
//     add a GEMM's K products in another order than the CPU's loop (the dominant effect);
//   - nvcc's FMA contraction (on by default: a·b + c rounded once instead of twice);
//   - CUDA's math functions: erff, expf, tanhf, rsqrtf within 2 ulp (CUDA C Programming
//     Guide, "Mathematical Functions"), glibc's within 1; no fast math is used (no
//     --use_fast_math, so division and sqrtf are correctly rounded and __expf is not used).
// The elementwise effects are a few ulp (< 1e-6 relative); the summation order is not, and is
// bounded by SumOrderBound below. Each test derives its GPU tolerance from these in a comment,
// and keeps it tight enough that the bugs it is there for (a wrong index, mask, scale or step)
// still land far outside.
#pragma once

#include <cmath>
#include <cstdint>

namespace ringmaster::trainer::cuda {

#ifdef CUDA_EMU
inline constexpr bool kEmulatedGpu = true;
#else
inline constexpr bool kEmulatedGpu = false;
#endif

// The tolerance of the device the test runs on.
inline constexpr double GpuTolerance(double emulated, double real_gpu) {
  return kEmulatedGpu ? emulated : real_gpu;
}

// fp32's unit roundoff.
inline constexpr double kFp32Unit = 0x1p-24;

// Two fp32 sums of the same K terms in different orders (with or without FMA) differ by at most
// 2·λ·√K·u·Σ|terms|: each is within λ·√K·u·Σ|terms| of the exact sum with probability at least
// 1 − 2K·exp(−λ²/2) (Higham and Mary, "A New Approach to Probabilistic Rounding Error
// Analysis", SIAM J. Sci. Comput. 2019: rounding errors as independent zero-mean variables,
// which blocked and split-K sums satisfy at least as well as a plain loop). λ = 7: a failure
// chance below 1e-9 per element for K up to 1e3. The worst-case bound (K·u instead of λ·√K·u)
// is ~√K/λ times larger and never reached in practice.
inline double SumOrderBound(int64_t K, double abs_sum) {
  constexpr double kLambda = 7.0;
  return 2.0 * kLambda * std::sqrt(static_cast<double>(K)) * kFp32Unit * abs_sum;
}

// ---- The small BERTs of the engine tests (hidden 32, 2 layers, intermediate <= 48, <= 3 labels,
// HF init, sometimes plus N(0, 0.05) noise, batches of <= 27 tokens), fp32, against BertModel.
//
// Forward: 18 GEMMs from the embeddings to the logits (per layer Q, K, V, scores, context,
// attention output, intermediate, output; pooler; classifier), K <= 48. Each GEMM's output
// differs from the CPU's by at most SumOrderBound(K, Σ|x·w|), Σ|x·w| <= K·E|x|·E|w| ≈
// 48·0.8·0.045 ≈ 1.7 for LayerNorm-ed activations (|x| ~ 1) and weights of std <= 0.055:
// 2·7·√48·u·1.7 ≈ 1e-5. LayerNorm, tanh and GELU are about 1-Lipschitz here and softmax rows sum
// to 1, so the layers pass errors on without growing them; the GEMMs' roundings are
// independent, so they add in quadrature: √18 · 1e-5 ≈ 4e-5 on the logits (O(0.1-1)), 2.5
// times that allowed. Cross-entropy is 1-Lipschitz in the logits: the same for the loss
// (relative to max(1, |loss|)). A missing bias, mask or dropout mask moves logits by >= 1e-2.
inline constexpr double kGpuLogitTolerance = 1e-4;
// Backward: 36 more GEMMs (dX and dW of each Linear, attention's four) on top of the forward's
// errors; weight gradients sum over rows (K <= 27) terms of both signs, whose Σ|terms| is up to
// ~√27 ≈ 5 times the gradient's scale: 2·7·√27·u·5 ≈ 2.2e-5 of the scale per GEMM, √54 · 2.2e-5
// ≈ 1.6e-4 in quadrature. Allowed: 5e-4 of each tensor's gradient scale (max |g|), 3 times the
// estimate and below the linear worst case (54 · 2.2e-5 = 1.2e-3). A wrong gradient (index,
// transpose, missing term) is off by O(1) of the scale. The global gradient norm, a weighted
// mean of those relative errors, gets the same 5e-4.
inline constexpr double kGpuGradScaleTolerance = 5e-4;

}  // namespace ringmaster::trainer::cuda
