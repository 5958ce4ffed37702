// Float copies between host and device memory on a stream, for CudaDataParallel's files
// (cuda_data_parallel*.cc); internal to them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "absl/status/status.h"
#include "trainer/cuda/cuda_status.h"

namespace ringmaster::trainer::cuda::data_parallel_internal {

inline absl::Status CopyToHost(float* dst, const float* src, size_t n, cudaStream_t stream) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

inline absl::Status CopyToDevice(float* dst, const float* src, size_t n, cudaStream_t stream) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer::cuda::data_parallel_internal
