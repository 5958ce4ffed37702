// PowerSGD (trainer/parallel/powersgd.h) on device buffers: the same matrices, the same seeded Q,
// the same three all-reduces (the uncompressed elements packed, P, Q') and the same error
// feedback, with M = G + E, the products and the commit as kernels (powersgd_kernels.h). Only P
// (rows x r) and Q' (cols x r) visit the host, to be orthonormalised and normalised in double
// exactly as the CPU does (PowerSgdOrthonormalise, PowerSgdWarmStart): kilobytes per matrix, not
// the gradients.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/parallel/powersgd.h"

namespace ringmaster::trainer::cuda {

class DevicePowerSgd {
 public:
  // As PowerSgd's constructor; InvalidArgument for what PowerSgd::init_status() would report.
  // Allocates on the current device.
  static absl::StatusOr<std::unique_ptr<DevicePowerSgd>> Create(
      const std::vector<MatrixRange>& matrices, size_t total, const PowerSgdOptions& options);
  ~DevicePowerSgd();
  DevicePowerSgd(const DevicePowerSgd&) = delete;
  DevicePowerSgd& operator=(const DevicePowerSgd&) = delete;

  // PowerSgd::AllReduce on device `grads` (total floats). `allreduce_sum(data, n)` sums device
  // data[0..n) over the ranks; the call must have completed, or be ordered on `stream`, when it
  // returns. Kernels run on `stream`; the call returns once the step is committed (it waits for
  // P and Q' on the host). On error grads, residuals and Q are untouched.
  absl::Status AllReduce(float* grads, int world_size,
                         const std::function<absl::Status(float*, size_t)>& allreduce_sum,
                         cudaStream_t stream);

  size_t wire_floats_per_call() const { return plan_.uncompressed_floats + p_floats_ + q_floats_; }
  size_t device_bytes() const { return device_bytes_; }

 private:
  DevicePowerSgd() = default;

  PowerSgdOptions options_;
  PowerSgdPlan plan_;
  std::vector<size_t> m_offset_, p_offset_, q_offset_;  // per compressed matrix
  size_t m_floats_ = 0, p_floats_ = 0, q_floats_ = 0;
  float *residual_ = nullptr, *m_ = nullptr, *q_ = nullptr, *p_ = nullptr, *qn_ = nullptr,
        *unc_ = nullptr;
  size_t device_bytes_ = 0;
  std::vector<float> q_host_, p_host_, qn_host_;  // Q (kept), P and Q' for the host steps
  std::vector<double> work_;
};

}  // namespace ringmaster::trainer::cuda
