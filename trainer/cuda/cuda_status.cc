#include "trainer/cuda/cuda_status.h"

#include <cublasLt.h>

#include "absl/strings/str_format.h"

namespace ringmaster::trainer::cuda {

absl::Status CudaStatus(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrFormat("%s at %s:%d: %s (%s)", call, file, line,
                                              cudaGetErrorString(error), cudaGetErrorName(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CublasStatus(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrFormat("%s at %s:%d: %s", call, file, line, cublasLtGetStatusString(status));
  switch (status) {
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace ringmaster::trainer::cuda
