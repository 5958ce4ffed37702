#include "trainer/cuda/parallel/gpu_intervals.h"

#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"

namespace ringmaster::trainer::cuda {

GpuIntervals::~GpuIntervals() {
  for (const auto& [a, b] : events_) {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
}

absl::StatusOr<size_t> GpuIntervals::Begin(cudaStream_t stream) {
  if (used_ == events_.size()) {
    std::pair<cudaEvent_t, cudaEvent_t> e{nullptr, nullptr};
    RM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e.first));
    if (cudaError_t err = cudaEventCreate(&e.second); err != cudaSuccess) {
      cudaEventDestroy(e.first);
      return CudaStatus(err, "cudaEventCreate", __FILE__, __LINE__);
    }
    events_.push_back(e);
  }
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[used_].first, stream));
  return used_++;
}

absl::Status GpuIntervals::End(size_t i, cudaStream_t stream) {
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[i].second, stream));
  return absl::OkStatus();
}

absl::Status GpuIntervals::TimedWait(cudaStream_t waiter, cudaEvent_t event) {
  const absl::StatusOr<size_t> i = Begin(waiter);
  // The wait is what the stream's correctness needs; the timing around it is only a figure.
  RM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(waiter, event, 0));
  RM_RETURN_IF_ERROR(i.status());
  return End(*i, waiter);
}

absl::StatusOr<std::vector<double>> GpuIntervals::Collect() {
  std::vector<double> seconds(used_);
  for (size_t i = 0; i < used_; ++i) {
    RM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[i].second));
    float ms = 0;
    RM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[i].first, events_[i].second));
    seconds[i] = ms * 1e-3;
  }
  used_ = 0;
  return seconds;
}

}  // namespace ringmaster::trainer::cuda
