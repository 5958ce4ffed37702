// The plain GEMM Gemm::Run falls back on when cuBLASLt offers no algorithm for a problem or
// refuses every candidate at run time (gemm.h): one thread per element of C, fp32 accumulation
// over K in order, so no GEMM shape ends a job. Slow next to cuBLASLt; meant for the rare shape
// cuBLASLt refuses (the N = 2 classifier with a bias epilogue is the likeliest).
//
// Row-major as gemm.h: C (M, N) = alpha·op(A)·op(B) + beta·C (C not read when beta is 0), then
// + bias (N) on every row, `batch` times. A and B are fp32, bf16 or fp16 (both of one type), C
// and the bias fp32. CPU reference: cpu::Gemm (gemm_gpu_test).
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>

namespace ringmaster::trainer::cuda {

struct PlainGemmArgs {
  int64_t M = 0, N = 0, K = 0;
  int batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  cudaDataType_t type = CUDA_R_32F;  // of A and B
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0, sa = 0, sb = 0;  // leading dimensions and batch strides (elements)
  float* c = nullptr;
  int64_t ldc = 0, sc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;  // N floats, or null
};

// cudaErrorInvalidValue for a type other than fp32/bf16/fp16, a batch beyond 65535 or negative
// sizes; otherwise the launch's error.
cudaError_t PlainGemm(const PlainGemmArgs& p, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
