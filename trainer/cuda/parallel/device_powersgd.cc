#include "trainer/cuda/parallel/device_powersgd.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/powersgd_kernels.h"

namespace ringmaster::trainer::cuda {

absl::StatusOr<std::unique_ptr<DevicePowerSgd>> DevicePowerSgd::Create(
    const std::vector<MatrixRange>& matrices, size_t total, const PowerSgdOptions& options) {
  std::unique_ptr<DevicePowerSgd> d(new DevicePowerSgd());
  d->options_ = options;
  RM_ASSIGN_OR_RETURN(d->plan_, PlanPowerSgd(matrices, total, options));
  for (const PowerSgdMatrixPlan& c : d->plan_.compressed) {
    d->m_offset_.push_back(d->m_floats_);
    d->p_offset_.push_back(d->p_floats_);
    d->q_offset_.push_back(d->q_floats_);
    d->m_floats_ += c.rows * c.cols;
    d->p_floats_ += c.rows * c.rank;
    d->q_floats_ += c.cols * c.rank;
  }
  auto alloc = [&](float** p, size_t count) -> absl::Status {
    RM_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(p), std::max<size_t>(count, 1) * sizeof(float)));
    d->device_bytes_ += count * sizeof(float);
    return absl::OkStatus();
  };
  RM_RETURN_IF_ERROR(alloc(&d->residual_, d->m_floats_));
  RM_RETURN_IF_ERROR(alloc(&d->m_, d->m_floats_));
  RM_RETURN_IF_ERROR(alloc(&d->q_, d->q_floats_));
  RM_RETURN_IF_ERROR(alloc(&d->p_, d->p_floats_));
  RM_RETURN_IF_ERROR(alloc(&d->qn_, d->q_floats_));
  RM_RETURN_IF_ERROR(alloc(&d->unc_, d->plan_.uncompressed_floats));
  RM_CUDA_RETURN_IF_ERROR(cudaMemset(d->residual_, 0, d->m_floats_ * sizeof(float)));
  d->q_host_.resize(d->q_floats_);
  for (size_t i = 0; i < d->plan_.compressed.size(); ++i) {
    const PowerSgdMatrixPlan& c = d->plan_.compressed[i];
    PowerSgdInitialQ(options.seed, c.index, d->q_host_.data() + d->q_offset_[i], c.cols * c.rank);
  }
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(d->q_, d->q_host_.data(), d->q_floats_ * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

DevicePowerSgd::~DevicePowerSgd() {
  for (float* p : {residual_, m_, q_, p_, qn_, unc_}) {
    if (p != nullptr) cudaFree(p);
  }
}

absl::Status DevicePowerSgd::AllReduce(
    float* grads, int world_size, const std::function<absl::Status(float*, size_t)>& allreduce_sum,
    cudaStream_t stream) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DevicePowerSgd::AllReduce: world_size must be >= 1, got ", world_size));
  }
  const std::vector<PowerSgdMatrixPlan>& mats = plan_.compressed;
  // 1. The uncompressed elements, packed.
  size_t pos = 0;
  for (const auto& [offset, size] : plan_.uncompressed) {
    RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(unc_ + pos, grads + offset, size * sizeof(float),
                                            cudaMemcpyDeviceToDevice, stream));
    pos += size;
  }
  if (pos > 0) RM_RETURN_IF_ERROR(allreduce_sum(unc_, pos));
  // 2. P = Σ_ranks M Q with M = G + E (grads and residuals untouched until the commit).
  for (size_t i = 0; i < mats.size(); ++i) {
    const PowerSgdMatrixPlan& c = mats[i];
    float* m = m_ + m_offset_[i];
    RM_CUDA_RETURN_IF_ERROR(
        PowerSgdFormM(grads + c.offset, residual_ + m_offset_[i], m, c.rows * c.cols, stream));
    RM_CUDA_RETURN_IF_ERROR(PowerSgdMQ(m, q_ + q_offset_[i], p_ + p_offset_[i],
                                       static_cast<int>(c.rows), static_cast<int>(c.cols),
                                       static_cast<int>(c.rank), stream));
  }
  if (p_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(p_, p_floats_));
  // 3. Orthonormalise each P on the host, in double, as the CPU does (the same input on every
  //    rank, so the same output).
  p_host_.resize(p_floats_);
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p_host_.data(), p_, p_floats_ * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < mats.size(); ++i) {
    PowerSgdOrthonormalise(p_host_.data() + p_offset_[i], mats[i].rows, mats[i].rank, work_);
  }
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p_, p_host_.data(), p_floats_ * sizeof(float),
                                          cudaMemcpyHostToDevice, stream));
  // 4. Q' = Σ_ranks Mᵀ P.
  for (size_t i = 0; i < mats.size(); ++i) {
    const PowerSgdMatrixPlan& c = mats[i];
    RM_CUDA_RETURN_IF_ERROR(PowerSgdMtP(m_ + m_offset_[i], p_ + p_offset_[i], qn_ + q_offset_[i],
                                        static_cast<int>(c.rows), static_cast<int>(c.cols),
                                        static_cast<int>(c.rank), stream));
  }
  if (q_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(qn_, q_floats_));
  // 5. Commit: the exact sums back in place, G = P Q'ᵀ, E = M − G / world, and the warm start.
  pos = 0;
  for (const auto& [offset, size] : plan_.uncompressed) {
    RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(grads + offset, unc_ + pos, size * sizeof(float),
                                            cudaMemcpyDeviceToDevice, stream));
    pos += size;
  }
  const float inv_world = 1.0f / static_cast<float>(world_size);
  for (size_t i = 0; i < mats.size(); ++i) {
    const PowerSgdMatrixPlan& c = mats[i];
    RM_CUDA_RETURN_IF_ERROR(PowerSgdCommit(p_ + p_offset_[i], qn_ + q_offset_[i], m_ + m_offset_[i],
                                           grads + c.offset, residual_ + m_offset_[i],
                                           static_cast<int>(c.rows), static_cast<int>(c.cols),
                                           static_cast<int>(c.rank), inv_world, stream));
  }
  qn_host_.resize(q_floats_);
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(qn_host_.data(), qn_, q_floats_ * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < mats.size(); ++i) {
    const PowerSgdMatrixPlan& c = mats[i];
    float* q = q_host_.data() + q_offset_[i];
    if (!PowerSgdWarmStart(qn_host_.data() + q_offset_[i], c.cols, c.rank, q)) {
      PowerSgdInitialQ(options_.seed, c.index, q, c.cols * c.rank);  // a NaN/inf step: restart
    }
  }
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(q_, q_host_.data(), q_floats_ * sizeof(float),
                                          cudaMemcpyHostToDevice, stream));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // q_host_ is reused next call
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer::cuda
