// CudaDataParallel's state to and from the host (cuda_data_parallel.h): the full parameters
// gathered from the shards, and the checkpoint ranges with their parameters and moments.
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/parallel/cuda_data_parallel.h"
#include "trainer/cuda/parallel/cuda_data_parallel_copies.h"

namespace ringmaster::trainer::cuda {
namespace {

using data_parallel_internal::CopyToDevice;
using data_parallel_internal::CopyToHost;

}  // namespace

absl::Status CudaDataParallel::GatherFullParams(std::vector<float>* out) {
  RM_RETURN_IF_ERROR(Join());
  out->assign(n_, 0.0f);
  if (!traits().shard_params) {
    RM_RETURN_IF_ERROR(CopyToHost(out->data(), full_params_, n_, stream_));
  } else {
    RM_ASSIGN_OR_RETURN(float* buf, Take());
    absl::Status s;
    for (int unit = 0; unit < plan_.num_units() && s.ok(); ++unit) {
      const UnitShard& u = parts().units[unit];
      s = GatherUnit(unit, buf);
      if (s.ok()) s = CopyToHost(out->data() + u.begin, buf, u.numel, stream_);
      // The host copy is asynchronous: wait before the buffer is reused by the next unit.
      if (s.ok() && cudaStreamSynchronize(stream_) != cudaSuccess) {
        s = absl::InternalError("GatherFullParams: cudaStreamSynchronize failed");
      }
    }
    Give(buf);
    RM_RETURN_IF_ERROR(s);
  }
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Settle();
}

ShardRanges CudaDataParallel::SaveRanges() const { return plan_.SaveRanges(); }

ShardRanges CudaDataParallel::LoadRanges() const { return plan_.LoadRanges(); }

absl::Status CudaDataParallel::CopyForSave(std::vector<float>* params, std::vector<float>* exp_avg,
                                           std::vector<float>* exp_avg_sq) const {
  const ShardRanges r = SaveRanges();
  params->resize(r.local_numel());
  exp_avg->resize(r.local_numel());
  exp_avg_sq->resize(r.local_numel());
  size_t pos = 0;
  auto copy = [&](size_t from, size_t count, const float* p) -> absl::Status {
    RM_RETURN_IF_ERROR(CopyToHost(params->data() + pos, p + from, count, stream_));
    RM_RETURN_IF_ERROR(CopyToHost(exp_avg->data() + pos, exp_avg_ + from, count, stream_));
    RM_RETURN_IF_ERROR(CopyToHost(exp_avg_sq->data() + pos, exp_avg_sq_ + from, count, stream_));
    pos += count;
    return absl::OkStatus();
  };
  const float* p = traits().shard_grads ? shard_params_ : full_params_;
  for (const auto& [from, count] : plan_.LocalSpans(r)) RM_RETURN_IF_ERROR(copy(from, count, p));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaDataParallel::LoadFrom(const std::vector<float>& params,
                                        const std::vector<float>& exp_avg,
                                        const std::vector<float>& exp_avg_sq) {
  const size_t want = LoadRanges().local_numel();
  if (params.size() != want || exp_avg.size() != want || exp_avg_sq.size() != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaDataParallel::LoadFrom: %d/%d/%d values for this rank's %d (sharding %s)",
        params.size(), exp_avg.size(), exp_avg_sq.size(), want, ShardingName(sharding())));
  }
  size_t pos = 0;
  auto copy = [&](size_t to, size_t count, float* p) -> absl::Status {
    RM_RETURN_IF_ERROR(CopyToDevice(p + to, params.data() + pos, count, stream_));
    RM_RETURN_IF_ERROR(CopyToDevice(exp_avg_ + to, exp_avg.data() + pos, count, stream_));
    RM_RETURN_IF_ERROR(CopyToDevice(exp_avg_sq_ + to, exp_avg_sq.data() + pos, count, stream_));
    pos += count;
    return absl::OkStatus();
  };
  float* p = traits().shard_grads ? shard_params_ : full_params_;
  for (const auto& [to, count] : plan_.LocalSpans(LoadRanges())) {
    RM_RETURN_IF_ERROR(copy(to, count, p));
  }
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (!traits().publish_shards()) return absl::OkStatus();
  // shard_grad_op: rebuild the full parameters from the loaded shards (collective).
  RM_RETURN_IF_ERROR(PublishShards());
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Settle();
}

}  // namespace ringmaster::trainer::cuda
