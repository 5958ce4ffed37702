// The cuBLAS (v2) stand-in: handles, streams, math mode and the fp32-compute GEMMs a BERT
// trainer calls (cublasSgemm, cublasGemmEx, cublasSgemmStridedBatched,
// cublasGemmStridedBatchedEx), on top of emu_gemm.h. Alpha and beta are host pointers (the
// default pointer mode; cublasSetPointerMode is not provided). Anything else is refused with
// CUBLAS_STATUS_NOT_SUPPORTED and a line on stderr.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "cuda_emu/census.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/emu_gemm.h"
#include "cuda_emu/streams.h"

namespace {

struct Handle {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

cublasStatus_t Refuse(cublasStatus_t st, const std::string& what) {
  std::fprintf(stderr, "cuda_emu cuBLAS stand-in: %s\n", what.c_str());
  return st;
}

bool ValidOp(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; }

// C = alpha·op(A)·op(B) + beta·C over `batch` strided batches.
cublasStatus_t Gemm(const char* api, cublasHandle_t handle, cublasOperation_t ta,
                    cublasOperation_t tb, int m, int n, int k, const void* alpha, const void* A,
                    cudaDataType a_type, int lda, long long stride_a, const void* B,
                    cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* C,
                    cudaDataType c_type, int ldc, long long stride_c, int batch,
                    cublasComputeType_t compute) {
  if (handle == nullptr || alpha == nullptr || beta == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(api) + ": null handle, alpha or beta");
  }
  if (!ValidOp(ta) || !ValidOp(tb)) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  std::string(api) + ": only CUBLAS_OP_N and CUBLAS_OP_T are implemented");
  }
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  std::string(api) + ": compute type " + std::to_string(compute) +
                      " (only CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_FAST_TF32)");
  }
  const auto* h = reinterpret_cast<const Handle*>(handle);
  cuda_emu::blas::GemmSpec s;
  s.api = api;
  s.trans_a = ta == CUBLAS_OP_T;
  s.trans_b = tb == CUBLAS_OP_T;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = batch;
  s.alpha = *static_cast<const float*>(alpha);
  s.beta = *static_cast<const float*>(beta);
  // CUBLAS_TF32_TENSOR_OP_MATH lets fp32 GEMMs with CUBLAS_COMPUTE_32F use TF32 tensor cores.
  s.tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
           (h->math == CUBLAS_TF32_TENSOR_OP_MATH && a_type == CUDA_R_32F);
  s.a = {"A", A, a_type, s.trans_a ? k : m, s.trans_a ? m : k, lda, stride_a};
  s.b = {"B", B, b_type, s.trans_b ? n : k, s.trans_b ? k : n, ldb, stride_b};
  s.c = {"C", C, c_type, m, n, ldc, stride_c};
  s.d = s.c;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // Nothing to compute or read.
  cuda_emu::CensusGemmCall(api, a_type, b_type, c_type, c_type, 2.0 * m * n * k * batch);
  if (cuda_emu::CensusDryRun()) return CUBLAS_STATUS_SUCCESS;  // counted, not run (census.h)
  // In stream order (the stand-in's own wait, not the caller's: not counted as a host sync).
  cuda_emu::Drain(h->stream);
  if (cuda_emu::StickyError() != cudaSuccess) {
    return Refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                  std::string(api) + ": the stream reported an error");
  }
  std::string error;
  const cublasStatus_t st = cuda_emu::blas::RunGemm(s, &error);
  return st == CUBLAS_STATUS_SUCCESS ? st : Refuse(st, error);
}

}  // namespace

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: null");
  *handle = reinterpret_cast<cublasHandle_t>(new Handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return Refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: null");
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return Refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: null");
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasSetMathMode: mode " + std::to_string(mode) +
                      " (only CUBLAS_DEFAULT_MATH and CUBLAS_TF32_TENSOR_OP_MATH)");
  }
  reinterpret_cast<Handle*>(handle)->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                              int m, int n, int k, const float* alpha, const float* A, int lda,
                              const float* B, int ldb, const float* beta, float* C, int ldc) {
  return Gemm("cublasSgemm", handle, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F,
              ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void* alpha, const void* A,
                            cudaDataType a_type, int lda, const void* B, cudaDataType b_type,
                            int ldb, const void* beta, void* C, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t /*algo*/) {
  return Gemm("cublasGemmEx", handle, ta, tb, m, n, k, alpha, A, a_type, lda, 0, B, b_type, ldb, 0,
              beta, C, c_type, ldc, 0, 1, compute);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int stride_a, const float* B, int ldb,
                                         long long int stride_b, const float* beta, float* C,
                                         int ldc, long long int stride_c, int batch) {
  return Gemm("cublasSgemmStridedBatched", handle, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda,
              stride_a, B, CUDA_R_32F, ldb, stride_b, beta, C, CUDA_R_32F, ldc, stride_c, batch,
              CUBLAS_COMPUTE_32F);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType a_type,
                                          int lda, long long int stride_a, const void* B,
                                          cudaDataType b_type, int ldb, long long int stride_b,
                                          const void* beta, void* C, cudaDataType c_type, int ldc,
                                          long long int stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t /*algo*/) {
  return Gemm("cublasGemmStridedBatchedEx", handle, ta, tb, m, n, k, alpha, A, a_type, lda,
              stride_a, B, b_type, ldb, stride_b, beta, C, c_type, ldc, stride_c, batch, compute);
}
