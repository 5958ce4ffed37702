// CUDA and cuBLAS(Lt) errors as absl::Status, carrying the failed call and its file:line, so a
// failure deep in a step reads "cudaMemcpyAsync(...) at trainer/cuda/x.cc:42: an illegal memory
// access was encountered (cudaErrorIllegalAddress)" in the trainer's log and exit status.
#pragma once

// cublasStatus_t through cublasLt.h: before CUDA 12, cublas_api.h is an error unless a cuBLAS
// header that defines CUBLASAPI includes it (scripts/compile-check-old-gpus.sh, CUDA 11.8).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace ringmaster::trainer::cuda {

// OK for cudaSuccess; otherwise Internal (ResourceExhausted for out-of-memory) naming `call`,
// `file`:`line` and the CUDA error's name and description.
absl::Status CudaStatus(cudaError_t error, const char* call, const char* file, int line);
// OK for CUBLAS_STATUS_SUCCESS; otherwise Internal (InvalidArgument for INVALID_VALUE,
// Unimplemented for NOT_SUPPORTED, ResourceExhausted for ALLOC_FAILED) naming the call and the
// status (cublasLtGetStatusString).
absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace ringmaster::trainer::cuda

// Return the Status from the enclosing function when a CUDA / cuBLAS call fails.
#define RM_CUDA_RETURN_IF_ERROR(call)                                                            \
  do {                                                                                           \
    const cudaError_t rm_cuda_error_ = (call);                                                   \
    if (rm_cuda_error_ != cudaSuccess)                                                           \
      return ::ringmaster::trainer::cuda::CudaStatus(rm_cuda_error_, #call, __FILE__, __LINE__); \
  } while (0)
#define RM_CUBLAS_RETURN_IF_ERROR(call)                                                    \
  do {                                                                                     \
    const cublasStatus_t rm_cublas_status_ = (call);                                       \
    if (rm_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                        \
      return ::ringmaster::trainer::cuda::CublasStatus(rm_cublas_status_, #call, __FILE__, \
                                                       __LINE__);                          \
  } while (0)
