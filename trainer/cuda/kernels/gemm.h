// Matrix products of the CUDA trainer through cuBLASLt, stated in the row-major terms the rest of
// the trainer uses (a matrix (R, C) with leading dimension ld has element (r, c) at r·ld + c), so
// callers read like the CPU model: Linear forward y = x·Wᵀ + b with W stored [out, in] as
// Hugging Face does, its two backward products, and the batched attention products.
//
// cuBLASLt is column-major. A row-major (R, C) matrix is the column-major (C, R) matrix with the
// same ld, so row-major C = op(A)·op(B) is computed as column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the call
// swaps A and B and keeps each operand's transpose flag. The bias epilogue then adds a vector of
// C's column count to every row, which is the Linear bias.
//
// Operands carry their precision (MatrixRef::type): fp32, or bf16 / fp16 for mixed precision
// (A and B of one type, C and the bias fp32, compute CUBLAS_COMPUTE_32F: what cuBLASLt runs on
// tensor cores from sm_80 for bf16 and sm_70 for fp16). autocast.h makes the 16-bit copies.
//
// cuBLASLt can refuse a product at run time although its heuristic offered an algorithm (an
// operand less aligned than the algorithm needs, a shape one kernel family cannot tile). So each
// plan (one per shape, types, bias and operand alignment) keeps up to kCandidates heuristic
// candidates and tries them in order, keeping the one that worked; the minimum-alignment
// preferences carry the operands' actual alignment, so the heuristic offers algorithms that can
// run on them. Where cuBLASLt has no algorithm or refuses every candidate, a plain fp32 kernel
// (gemm_fallback.h) computes the product and its bias, with one warning line per plan: no GEMM
// shape ends a job. Errors that remain name the call and the problem's dimensions.
//
// Epilogues used: none and BIAS. GELU is not fused (cuBLASLt's GELU epilogue is believed to be the
// tanh approximation while BERT's `gelu` is exact erf: docs/cuda.md), and bias gradients are
// reduced by BiasGradient (own deterministic kernel) rather than the BGRAD epilogues.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer::cuda {

// One row-major operand: `ptr` points at batch 0; batch i starts `batch_stride` elements later.
struct MatrixRef {
  const void* ptr = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  bool transpose = false;  // use op(X) = Xᵀ
  int64_t ld = 0;          // elements between consecutive rows of the stored matrix
  int64_t batch_stride = 0;
};

// C (M, N) = alpha · op(A) (M, K) · op(B) (K, N) + beta · C [+ bias (N) on every row], `batch`
// times. C is written in place (beta reads its previous value).
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  int batch = 1;
  MatrixRef a, b;
  void* c = nullptr;
  cudaDataType_t c_type = CUDA_R_32F;
  int64_t ldc = 0;
  int64_t c_batch_stride = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;  // N elements of c_type, or null
};

class Gemm {
 public:
  // `tf32`: fp32 operands may run on TF32 tensor cores (sm_80+; 10-bit mantissa inputs).
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(bool tf32 = false,
                                                      size_t workspace_bytes = 32u << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the product on `stream`. Shapes are checked (non-negative, ld large enough) before
  // anything is enqueued; an error names the problem's dimensions.
  absl::Status Run(const GemmProblem& p, cudaStream_t stream);

  // The Linear problems below with `type` for both operands (C and the bias stay fp32).
  static GemmProblem LinearForwardProblem(const void* x, const void* w, cudaDataType_t type,
                                          const float* b, float* y, int64_t rows, int64_t in,
                                          int64_t out);
  static GemmProblem LinearInputGradProblem(const void* dy, const void* w, cudaDataType_t type,
                                            float* dx, int64_t rows, int64_t in, int64_t out,
                                            bool accumulate);
  static GemmProblem LinearWeightGradProblem(const void* dy, const void* x, cudaDataType_t type,
                                             float* dw, int64_t rows, int64_t in, int64_t out);

  // Linear layers, row-major, W stored [out, in]:
  //   forward        y (rows, out) = x (rows, in) · Wᵀ + b          (b may be null)
  //   input grad     dx (rows, in) = dy · W        (+ dx when accumulate)
  //   weight grad    dW (out, in) += dyᵀ · x       (always accumulates, as gradients do)
  absl::Status LinearForward(const float* x, const float* w, const float* b, float* y, int64_t rows,
                             int64_t in, int64_t out, cudaStream_t stream);
  absl::Status LinearInputGrad(const float* dy, const float* w, float* dx, int64_t rows, int64_t in,
                               int64_t out, bool accumulate, cudaStream_t stream);
  absl::Status LinearWeightGrad(const float* dy, const float* x, float* dw, int64_t rows,
                                int64_t in, int64_t out, cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }

  // Heuristic candidates requested per plan.
  static constexpr int kCandidates = 8;
  struct Stats {
    int64_t refused_candidates = 0;  // cublasLtMatmul calls refused, the next candidate tried
    int64_t plain_runs = 0;          // products computed by the plain fp32 kernel
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Key {
    int64_t m, n, k, lda, ldb, ldc, sa, sb, sc;
    int batch, ta, tb, a_type, b_type, c_type, has_bias;
    int align_a, align_b, align_c;  // bytes: the largest power of two <= 16 dividing the pointers
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.sa, k.sb, k.sc, k.batch,
                        k.ta, k.tb, k.a_type, k.b_type, k.c_type, k.has_bias, k.align_a, k.align_b,
                        k.align_c);
    }
  };
  struct Plan;  // descriptors + chosen algorithm for one Key

  Gemm() = default;
  absl::StatusOr<Plan*> PlanFor(const Key& key);
  absl::Status RunPlain(const GemmProblem& p, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  bool tf32_ = false;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
  Stats stats_;
};

}  // namespace ringmaster::trainer::cuda
