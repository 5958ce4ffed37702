// CudaDataParallel (cuda_data_parallel.h): creation and teardown, the two streams and the comm
// phases between them, the pool of unit-sized buffers, the step protocol and the update. The
// collectives are in cuda_data_parallel_collectives.cc, the model's unit access (gathers,
// prefetch, per-unit reductions) in cuda_data_parallel_units.cc, host copies of the state
// (checkpoints, the full parameters) in cuda_data_parallel_checkpoint.cc.
#include "trainer/cuda/parallel/cuda_data_parallel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/kernels/wire_codec.h"
#include "trainer/cuda/parallel/cuda_data_parallel_copies.h"

namespace ringmaster::trainer::cuda {
namespace {

// Pooled buffers allocated up front: the most in use at once (the head kept between forward
// and backward, the unit being computed, its gradients, the unit prefetched).
constexpr int kInitialPool = 4;
// Buffers the pool may add beyond those rather than make compute wait for communication still
// reading a free one (gradients whose reduction is in flight).
constexpr int kInFlightPool = 2;

using data_parallel_internal::CopyToDevice;

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDataParallel>> CudaDataParallel::Create(
    const ParamLayout& layout, Sharding sharding, const DataParallelComms& comms,
    const std::vector<float>& initial, cudaStream_t stream, const CudaCompression& compression,
    size_t bucket_cap_bytes) {
  if (initial.size() != layout.total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaDataParallel: %d parameters given for a layout of %d", initial.size(), layout.total));
  }
  std::unique_ptr<CudaDataParallel> dp(new CudaDataParallel());
  dp->stream_ = stream;
  dp->cur_ = stream;
  dp->n_ = layout.total;
  dp->world_size_ = comms.world != nullptr ? comms.world->size() : 1;
  if (dp->world_size_ == 1) sharding = Sharding::kNoShard;  // nothing to shard
  RM_ASSIGN_OR_RETURN(dp->plan_, ShardingPlan::Make(layout, sharding, comms, compression.powersgd,
                                                    bucket_cap_bytes));
  const ShardingTraits& t = dp->traits();
  if (dp->world_size_ > 1) {
    RM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&dp->comm_stream_, cudaStreamNonBlocking));
    RM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&dp->to_comm_, cudaEventDisableTiming));
    // A timing event: the last join's wait is checked to end after it (last_join_lag_seconds).
    RM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&dp->to_compute_));
  }
  dp->codec_ = dp->world_size_ == 1 ? WireCodec::kNone : compression.codec;
  dp->compression_ = compression;
  const int U = dp->plan_.num_units();
  dp->skip_ = ZeroBlockSkip(compression.skip_zero_blocks, AllReduceKeys::Count(U));
  for (int u = 0; u < U; ++u) dp->max_padded_ = std::max(dp->max_padded_, dp->parts().padded(u));
  const size_t local_total = dp->parts().local_total;

  auto alloc = [&](auto** p, size_t count) -> absl::Status {  // zeroed
    const size_t bytes = count * sizeof(**p);
    RM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(p), std::max<size_t>(bytes, 1)));
    dp->persistent_bytes_ += bytes;
    RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(*p, 0, bytes, stream));
    return absl::OkStatus();
  };
  const size_t m = dp->update_size();
  std::vector<uint8_t> mask(m, 0);
  for (const AdamWRange& r : dp->plan_.DecayRanges(layout)) {
    std::fill(mask.begin() + r.begin, mask.begin() + r.end, r.decay ? 1 : 0);
  }
  if (!t.shard_params) {
    RM_RETURN_IF_ERROR(alloc(&dp->full_params_, dp->n_));
    RM_RETURN_IF_ERROR(alloc(&dp->full_grads_, dp->n_));
    RM_RETURN_IF_ERROR(CopyToDevice(dp->full_params_, initial.data(), dp->n_, stream));
  }
  if (t.shard_grads) {
    RM_RETURN_IF_ERROR(alloc(&dp->shard_params_, m));
    RM_RETURN_IF_ERROR(alloc(&dp->shard_grads_, m));
    std::vector<float> shard(m, 0.0f);  // padding stays zero, and AdamW keeps it so
    dp->plan_.CopyShards(initial.data(), shard.data());
    RM_RETURN_IF_ERROR(CopyToDevice(dp->shard_params_, shard.data(), m, stream));
    RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // `shard` goes out of scope
    size_t max_shard = 0;
    for (const UnitShard& u : dp->parts().units) max_shard = std::max(max_shard, u.shard);
    RM_RETURN_IF_ERROR(alloc(&dp->reduced_, max_shard));
  }
  RM_RETURN_IF_ERROR(alloc(&dp->exp_avg_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->exp_avg_sq_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->decay_mask_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->norm_scratch_, GradNormScratchDoubles(m)));
  RM_RETURN_IF_ERROR(alloc(&dp->sum_sq_, 1));
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dp->decay_mask_, mask.data(), m, cudaMemcpyHostToDevice, stream));
  if (dp->world_size_ > 1) dp->two_stage_ = std::make_unique<DeviceTwoStageScratch>();
  if (dp->codec_ != WireCodec::kNone) {
    const size_t g = static_cast<size_t>(dp->group()->size());
    const bool int8 = dp->codec_ == WireCodec::kInt8;
    if (t.shard_grads) {
      for (const UnitShard& u : dp->parts().units) {
        dp->stride_ = std::max(dp->stride_, (EncodedBytes(dp->codec_, u.shard) + 3) / 4 * 4);
      }
      RM_RETURN_IF_ERROR(alloc(&dp->send_, dp->stride_ * g));
      RM_RETURN_IF_ERROR(alloc(&dp->recv_, dp->stride_ * g));
      if (int8) RM_RETURN_IF_ERROR(alloc(&dp->residual_rs_, local_total * g));
    }
    // The all-reduces' residuals: over the replicated gradients (all, or the shards across
    // nodes).
    if (int8 && dp->plan_.replica_comm() != nullptr) {
      RM_RETURN_IF_ERROR(alloc(&dp->residual_ag_, m));
    }
  }
  if (compression.powersgd && dp->world_size_ > 1 && dp->plan_.replica_comm()->size() > 1) {
    PowerSgdOptions po;
    po.rank = compression.powersgd_rank;
    po.seed = compression.seed;
    RM_ASSIGN_OR_RETURN(dp->powersgd_, DevicePowerSgd::Create(dp->plan_.PowerSgdMatrices(layout),
                                                              dp->plan_.update_size(), po));
  }
  dp->gathered_.assign(U, nullptr);
  dp->prefetched_.assign(U, false);
  dp->ready_.assign(U, nullptr);
  dp->unit_grads_.assign(U, nullptr);
  if (t.shard_grads) {
    std::vector<float*> warm;
    for (int i = 0; i < kInitialPool; ++i) {
      RM_ASSIGN_OR_RETURN(float* p, dp->Take());
      warm.push_back(p);
    }
    for (float* p : warm) dp->Give(p);
    RM_RETURN_IF_ERROR(alloc(&dp->spare_, dp->max_padded_));
  }
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // `mask` goes out of scope
  return dp;
}

CudaDataParallel::~CudaDataParallel() {
  for (const std::shared_ptr<Work>& w : pending_) w->Wait().IgnoreError();
  if (comm_stream_ != nullptr) {
    cudaStreamSynchronize(comm_stream_);
    cudaStreamDestroy(comm_stream_);
  }
  for (cudaEvent_t e : {to_comm_, to_compute_}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (cudaEvent_t e : ready_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (void* p :
       {static_cast<void*>(full_params_), static_cast<void*>(full_grads_),
        static_cast<void*>(shard_params_), static_cast<void*>(shard_grads_),
        static_cast<void*>(exp_avg_), static_cast<void*>(exp_avg_sq_),
        static_cast<void*>(decay_mask_), static_cast<void*>(reduced_),
        static_cast<void*>(norm_scratch_), static_cast<void*>(sum_sq_), static_cast<void*>(spare_),
        static_cast<void*>(residual_rs_), static_cast<void*>(residual_ag_),
        static_cast<void*>(send_), static_cast<void*>(recv_), small_}) {
    if (p != nullptr) cudaFree(p);
  }
  for (float* p : all_pooled_) cudaFree(p);
}

absl::Status CudaDataParallel::Settle() {
  std::vector<std::shared_ptr<Work>> works;
  works.swap(pending_);
  for (const std::shared_ptr<Work>& w : works) {
    if (absl::Status s = w->Wait(); !s.ok()) Fail(s);
  }
  return status();
}

CudaDataParallel::CommPhase::CommPhase(CudaDataParallel* dp) : dp_(dp) {
  if (dp_->comm_stream_ == nullptr) return;
  ++dp_->phases_;
  cudaError_t e = cudaEventRecord(dp_->to_comm_, dp_->stream_);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(dp_->comm_stream_, dp_->to_comm_, 0);
  if (e != cudaSuccess) dp_->Fail(CudaStatus(e, "cudaStreamWaitEvent", __FILE__, __LINE__));
  dp_->cur_ = dp_->comm_stream_;
}

CudaDataParallel::CommPhase::~CommPhase() { dp_->cur_ = dp_->stream_; }

absl::Status CudaDataParallel::Join() {
  if (joined_ == phases_) return absl::OkStatus();
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(to_compute_, comm_stream_));
  join_wait_.reset();
  RM_RETURN_IF_ERROR(exposed_.TimedWait(stream_, to_compute_));
  join_wait_ = exposed_.size() - 1;
  joined_ = phases_;
  return absl::OkStatus();
}

absl::StatusOr<float*> CudaDataParallel::Take() {
  // Inside a comm phase any free buffer will do: the phase runs after the compute issued so far
  // and after earlier phases. On the compute stream one no phase since the last join used, or
  // else the compute stream joins first.
  const bool comm = cur_ != stream_;
  auto it = std::find_if(pool_.begin(), pool_.end(),
                         [&](const auto& b) { return comm || b.second <= joined_; });
  if (it == pool_.end() && !pool_.empty() &&
      all_pooled_.size() >= static_cast<size_t>(kInitialPool + kInFlightPool)) {
    RM_RETURN_IF_ERROR(Join());
    it = pool_.begin();
  }
  if (it != pool_.end()) {
    float* p = it->first;
    pool_.erase(it);
    return p;
  }
  float* p = nullptr;
  RM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&p), max_padded_ * sizeof(float)));
  all_pooled_.push_back(p);
  return p;
}

void CudaDataParallel::Give(float* p) {
  if (p != nullptr) pool_.emplace_back(p, cur_ != stream_ ? phases_ : 0);
}

size_t CudaDataParallel::pooled_bytes() const {
  return all_pooled_.size() * max_padded_ * sizeof(float) + small_bytes_ +
         (two_stage_ != nullptr ? two_stage_->device_bytes() : 0) +
         (powersgd_ != nullptr ? powersgd_->device_bytes() : 0);
}

absl::Status CudaDataParallel::BeginStep() {
  RM_RETURN_IF_ERROR(Join());
  if (full_grads_ != nullptr) {
    RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(full_grads_, 0, n_ * sizeof(float), stream_));
  }
  if (shard_grads_ != nullptr) {
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(shard_grads_, 0, parts().local_total * sizeof(float), stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaDataParallel::PublishShards() {
  RM_ASSIGN_OR_RETURN(float* buf, Take());
  absl::Status s;
  for (int unit = 0; unit < plan_.num_units() && s.ok(); ++unit) {
    const UnitShard& u = parts().units[unit];
    s = GatherUnit(unit, buf);
    if (!s.ok()) break;
    if (cudaError_t e = cudaMemcpyAsync(full_params_ + u.begin, buf, u.numel * sizeof(float),
                                        cudaMemcpyDeviceToDevice, cur_);
        e != cudaSuccess) {
      s = CudaStatus(e, "cudaMemcpyAsync", __FILE__, __LINE__);
    }
  }
  Give(buf);
  return s;
}

absl::Status CudaDataParallel::Update(int64_t step, double lr, const AdamWOptions& adam) {
  optimizer_step_ = step;
  float* params = traits().shard_grads ? shard_params_ : full_params_;
  RM_CUDA_RETURN_IF_ERROR(AdamWStep(params, update_grads(), exp_avg_, exp_avg_sq_, decay_mask_,
                                    update_size(), step, lr, adam.beta1, adam.beta2, adam.eps,
                                    adam.weight_decay, stream_));
  if (!traits().publish_shards()) return absl::OkStatus();
  return PublishShards();  // the updated shards into every rank's full parameters
}

}  // namespace ringmaster::trainer::cuda
