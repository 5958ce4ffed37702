#include "trainer/cuda/cuda_data_parallel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/attention_ops.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/wire_codec_gpu.h"

namespace ringmaster::trainer::cuda {
namespace {

// Pooled buffers allocated up front: the most in use at once (the head kept between forward
// and backward, the unit being computed, its gradients, the unit prefetched).
constexpr int kInitialPool = 4;
// Buffers the pool may add beyond those rather than make compute wait for communication still
// reading a free one (gradients whose reduction is in flight).
constexpr int kInFlightPool = 2;

// Bytes a ring all-reduce of `floats` sends from each of g ranks: 2(g-1)/g of them.
uint64_t AllReduceBytes(size_t floats, int g) {
  return 2 * floats * sizeof(float) * static_cast<uint64_t>(g - 1) / static_cast<uint64_t>(g);
}

absl::Status CopyToHost(float* dst, const float* src, size_t n, cudaStream_t stream) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

absl::Status CopyToDevice(float* dst, const float* src, size_t n, cudaStream_t stream) {
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

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
  dp->comms_ = comms;
  dp->world_size_ = comms.world != nullptr ? comms.world->size() : 1;
  if (dp->world_size_ == 1) sharding = Sharding::kNoShard;  // nothing to shard
  const bool hybrid = sharding == Sharding::kHybridShard;
  if (hybrid && (comms.intra == nullptr || comms.inter == nullptr)) {
    return absl::InvalidArgumentError(
        "hybrid_shard needs intra-node and inter-node communicators (torchrun's "
        "LOCAL_WORLD_SIZE must be the same on every node)");
  }
  dp->sharding_ = sharding;
  if (bucket_cap_bytes > 0 && sharding != Sharding::kNoShard) {
    return absl::InvalidArgumentError(
        absl::StrCat("distributed.bucket_cap_mb applies to sharding no_shard only (got ",
                     std::string(ShardingName(sharding)), ")"));
  }
  if (dp->world_size_ > 1) {
    RM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&dp->comm_stream_, cudaStreamNonBlocking));
    RM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&dp->to_comm_, cudaEventDisableTiming));
    RM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&dp->to_compute_, cudaEventDisableTiming));
  }
  dp->codec_ = dp->world_size_ == 1 ? WireCodec::kNone : compression.codec;
  dp->compression_ = compression;
  if (compression.powersgd && dp->world_size_ > 1 && sharding != Sharding::kNoShard && !hybrid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compression: powersgd works on replicated gradients: use sharding no_shard or "
        "hybrid_shard (got ",
        std::string(ShardingName(sharding)), "); int8/fp16/bf16 work with every sharding"));
  }
  dp->group_ = hybrid ? comms.intra : comms.world;
  dp->parts_ = dp->group_ != nullptr
                   ? UnitShards::Make(layout, dp->group_->rank(), dp->group_->size())
                   : UnitShards::Make(layout, 0, 1);
  dp->local_total_ = dp->parts_.local_total;
  if (sharding == Sharding::kNoShard) {
    RM_ASSIGN_OR_RETURN(dp->buckets_, GradBuckets::Make(dp->parts_.units, bucket_cap_bytes));
  }
  for (int u = 0; u < static_cast<int>(dp->parts_.units.size()); ++u) {
    dp->max_padded_ = std::max(dp->max_padded_, dp->parts_.padded(u));
  }

  auto alloc = [&](auto** p, size_t count) -> absl::Status {
    const size_t bytes = count * sizeof(**p);
    RM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(p), std::max<size_t>(bytes, 1)));
    dp->persistent_bytes_ += bytes;
    return absl::OkStatus();
  };
  const size_t m = dp->update_size();
  std::vector<uint8_t> mask(m, 0);
  if (sharding == Sharding::kNoShard) {
    RM_RETURN_IF_ERROR(alloc(&dp->full_params_, dp->n_));
    RM_RETURN_IF_ERROR(alloc(&dp->full_grads_, dp->n_));
    for (const ParamSpec& s : layout.specs) {
      std::fill_n(mask.begin() + s.offset, s.numel, s.weight_decay ? 1 : 0);
    }
    RM_RETURN_IF_ERROR(CopyToDevice(dp->full_params_, initial.data(), dp->n_, stream));
  } else {
    if (!dp->sharded_params()) {
      RM_RETURN_IF_ERROR(alloc(&dp->full_params_, dp->n_));
      RM_RETURN_IF_ERROR(alloc(&dp->full_grads_, dp->n_));
      RM_RETURN_IF_ERROR(CopyToDevice(dp->full_params_, initial.data(), dp->n_, stream));
    }
    RM_RETURN_IF_ERROR(alloc(&dp->shard_params_, m));
    RM_RETURN_IF_ERROR(alloc(&dp->shard_grads_, m));
    std::vector<float> shard(m, 0.0f);  // padding stays zero, and AdamW keeps it so
    for (const UnitShard& u : dp->parts_.units) {
      const size_t ob = u.owned_begin, oe = ob + u.valid;
      std::copy(initial.begin() + ob, initial.begin() + oe, shard.begin() + u.local);
      for (const ParamSpec& s : layout.specs) {
        const size_t b = std::max(ob, s.offset), e = std::min(oe, s.offset + s.numel);
        if (b < e)
          std::fill(mask.begin() + u.local + (b - ob), mask.begin() + u.local + (e - ob),
                    s.weight_decay ? 1 : 0);
      }
    }
    RM_RETURN_IF_ERROR(CopyToDevice(dp->shard_params_, shard.data(), m, stream));
    RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // `shard` goes out of scope
    size_t max_shard = 0;
    for (const UnitShard& u : dp->parts_.units) max_shard = std::max(max_shard, u.shard);
    RM_RETURN_IF_ERROR(alloc(&dp->reduced_, max_shard));
  }
  RM_RETURN_IF_ERROR(alloc(&dp->exp_avg_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->exp_avg_sq_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->decay_mask_, m));
  RM_RETURN_IF_ERROR(alloc(&dp->norm_scratch_, GradNormScratchDoubles(m)));
  RM_RETURN_IF_ERROR(alloc(&dp->sum_sq_, 1));
  RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dp->exp_avg_, 0, m * sizeof(float), stream));
  RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dp->exp_avg_sq_, 0, m * sizeof(float), stream));
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dp->decay_mask_, mask.data(), m, cudaMemcpyHostToDevice, stream));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (dp->codec_ != WireCodec::kNone) {
    const size_t g = static_cast<size_t>(dp->group_->size());
    const bool int8 = dp->codec_ == WireCodec::kInt8;
    dp->two_stage_ = std::make_unique<DeviceTwoStageScratch>();
    if (sharding != Sharding::kNoShard) {
      for (const UnitShard& u : dp->parts_.units) {
        dp->stride_ = std::max(dp->stride_, (EncodedBytes(dp->codec_, u.shard) + 3) / 4 * 4);
      }
      RM_RETURN_IF_ERROR(alloc(&dp->send_, dp->stride_ * g));
      RM_RETURN_IF_ERROR(alloc(&dp->recv_, dp->stride_ * g));
      if (int8) RM_RETURN_IF_ERROR(alloc(&dp->residual_rs_, dp->local_total_ * g));
    }
    const size_t ag = sharding == Sharding::kNoShard       ? dp->n_
                      : sharding == Sharding::kHybridShard ? dp->local_total_
                                                           : 0;
    if (int8 && ag > 0) RM_RETURN_IF_ERROR(alloc(&dp->residual_ag_, ag));
    if (dp->residual_rs_ != nullptr) {
      RM_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(dp->residual_rs_, 0, dp->local_total_ * g * sizeof(float), stream));
    }
    if (dp->residual_ag_ != nullptr) {
      RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dp->residual_ag_, 0, ag * sizeof(float), stream));
    }
    RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  if (compression.powersgd && dp->world_size_ > 1 && (!hybrid || dp->comms_.inter->size() > 1)) {
    PowerSgdOptions po;
    po.rank = compression.powersgd_rank;
    po.seed = compression.seed;
    RM_ASSIGN_OR_RETURN(
        dp->powersgd_,
        DevicePowerSgd::Create(PowerSgdMatricesFor(layout, hybrid ? &dp->parts_ : nullptr),
                               hybrid ? dp->local_total_ : dp->n_, po));
  }
  const size_t U = dp->parts_.units.size();
  dp->gathered_.assign(U, nullptr);
  dp->prefetched_.assign(U, false);
  dp->ready_.assign(U, nullptr);
  dp->unit_grads_.assign(U, nullptr);
  if (sharding != Sharding::kNoShard) {
    std::vector<float*> warm;
    for (int i = 0; i < kInitialPool; ++i) {
      RM_ASSIGN_OR_RETURN(float* p, dp->Take());
      warm.push_back(p);
    }
    for (float* p : warm) dp->Give(p);
    RM_RETURN_IF_ERROR(alloc(&dp->spare_, dp->max_padded_));
  }
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

void CudaDataParallel::Fail(const absl::Status& s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = s;
}

absl::Status CudaDataParallel::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
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
  RM_RETURN_IF_ERROR(exposed_.TimedWait(stream_, to_compute_));
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

absl::StatusOr<size_t> CudaDataParallel::CommBegin() {
  RM_ASSIGN_OR_RETURN(const size_t timing, comm_time_.Begin(cur_));
  comm_on_compute_.push_back(cur_ == stream_);  // nothing overlaps it: exposed whole
  return timing;
}

absl::Status CudaDataParallel::CommEnd(size_t timing) { return comm_time_.End(timing, cur_); }

void CudaDataParallel::Issue(const std::function<std::shared_ptr<Work>()>& issue) {
  absl::StatusOr<size_t> timing = CommBegin();
  if (!timing.ok()) {
    Fail(timing.status());
    return;
  }
  Keep(issue());
  if (absl::Status s = CommEnd(*timing); !s.ok()) Fail(s);
}

absl::Status CudaDataParallel::CollectCommTime() {
  RM_ASSIGN_OR_RETURN(const std::vector<double> comm, comm_time_.Collect());
  double seconds = 0, exposed_seconds = 0;
  for (size_t i = 0; i < comm.size(); ++i) {
    seconds += comm[i];
    if (comm_on_compute_[i]) exposed_seconds += comm[i];
  }
  comm_on_compute_.clear();
  RM_ASSIGN_OR_RETURN(const std::vector<double> exposed, exposed_.Collect());
  for (double s : exposed) exposed_seconds += s;
  last_comm_seconds_ = seconds;
  comm_seconds_total_ += seconds;
  last_exposed_seconds_ = exposed_seconds;
  exposed_seconds_total_ += exposed_seconds;
  return absl::OkStatus();
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
        cudaMemsetAsync(shard_grads_, 0, local_total_ * sizeof(float), stream_));
  }
  return absl::OkStatus();
}

void CudaDataParallel::BeginMicroBatch(bool last_of_step, bool training) {
  last_micro_ = last_of_step;
  training_ = training;
  backward_ = false;
}

absl::Status CudaDataParallel::GatherUnit(int unit, float* out) {
  const UnitShard& u = parts_.units[unit];
  const float* mine = shard_params_ + u.local;
  if (group_->size() == 1) {
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out, mine, u.shard * sizeof(float), cudaMemcpyDeviceToDevice, cur_));
    return absl::OkStatus();
  }
  comm_.gather_bytes += u.shard * sizeof(float) * static_cast<uint64_t>(group_->size() - 1);
  Issue([&] { return group_->AllGatherAsync(mine, out, u.shard, DataType::kFloat32, stream()); });
  return absl::OkStatus();
}

absl::Status CudaDataParallel::ReduceScatterInto(int unit, const float* padded, float* out) {
  const UnitShard& u = parts_.units[unit];
  const int g = group_->size();
  if (g == 1) {
    RM_CUDA_RETURN_IF_ERROR(AddInPlace(out, padded, u.shard, cur_));
    return absl::OkStatus();
  }
  const uint64_t bytes = u.shard * sizeof(float) * static_cast<uint64_t>(g - 1);
  comm_.reduce_raw_bytes += bytes;
  if (codec_ == WireCodec::kNone) {
    comm_.reduce_wire_bytes += bytes;
    Issue([&] {
      return group_->ReduceScatterSumAsync(padded, reduced_, u.shard, DataType::kFloat32, stream());
    });
    RM_CUDA_RETURN_IF_ERROR(AddInPlace(out, reduced_, u.shard, cur_));
    return absl::OkStatus();
  }
  // Block r of the padded unit, encoded for rank r; each owner adds the g decoded blocks it
  // receives in rank order (the CPU engine's order, so the same bits for the same inputs).
  const size_t encoded = EncodedBytes(codec_, u.shard);
  comm_.reduce_wire_bytes += encoded * static_cast<uint64_t>(g - 1);
  float* residual = residual_rs_ != nullptr ? residual_rs_ + u.local * g : nullptr;
  for (int r = 0; r < g; ++r) {
    RM_CUDA_RETURN_IF_ERROR(WireEncode(codec_, padded + r * u.shard, u.shard,
                                       residual != nullptr ? residual + r * u.shard : nullptr,
                                       send_ + r * stride_, cur_));
  }
  Issue([&] { return group_->AllToAllAsync(send_, recv_, stride_, DataType::kBytes, stream()); });
  for (int r = 0; r < g; ++r) {
    RM_CUDA_RETURN_IF_ERROR(WireDecodeAdd(codec_, recv_ + r * stride_, u.shard, out, cur_));
  }
  return absl::OkStatus();
}

absl::Status CudaDataParallel::AllReduceGrads(Communicator& comm, float* data, size_t n,
                                              float* residual) {
  const uint64_t raw = AllReduceBytes(n, comm.size());
  comm_.reduce_raw_bytes += raw;
  if (codec_ == WireCodec::kNone) {
    comm_.reduce_wire_bytes += raw;
    Issue([&] { return comm.AllReduceSumAsync(data, n, DataType::kFloat32, stream()); });
    return absl::OkStatus();
  }
  TwoStageStats stats;
  RM_ASSIGN_OR_RETURN(const size_t timing, CommBegin());
  RM_RETURN_IF_ERROR(DeviceTwoStageAllReduce(codec_, comm, data, n, residual,
                                             /*skip_zero_chunks=*/true, *two_stage_, cur_, &stats));
  RM_RETURN_IF_ERROR(CommEnd(timing));
  comm_.reduce_wire_bytes += stats.wire_bytes;
  return absl::OkStatus();
}

const float* CudaDataParallel::AcquireParams(int unit) {
  const UnitShard& u = parts_.units[unit];
  if (!sharded_params()) return full_params_ + u.begin;
  // Gathered unless it is the head kept for backward or was prefetched; a failure is kept and
  // the pass runs on in the spare buffer (the step reports it).
  Prefetch(unit);
  if (gathered_[unit] == nullptr) return spare_;
  if (prefetched_[unit]) {  // the compute reads the unit next: after its gather
    prefetched_[unit] = false;
    if (absl::Status s = exposed_.TimedWait(stream_, ready_[unit]); !s.ok()) Fail(s);
  }
  // Gather the next unit while this one computes (FSDP's forward and backward prefetch): in
  // backward (units in reverse) its gather then does not wait behind this unit's reduction.
  if (backward_) {
    if (training_ && unit > 0) Prefetch(unit - 1);
  } else if (unit + 1 < static_cast<int>(parts_.units.size())) {
    Prefetch(unit + 1);
  }
  return gathered_[unit];
}

void CudaDataParallel::Prefetch(int unit) {
  if (gathered_[unit] != nullptr) return;
  if (ready_[unit] == nullptr) {
    if (cudaError_t e = cudaEventCreateWithFlags(&ready_[unit], cudaEventDisableTiming);
        e != cudaSuccess) {
      Fail(CudaStatus(e, "cudaEventCreateWithFlags", __FILE__, __LINE__));
      return;
    }
  }
  CommPhase phase(this);
  absl::StatusOr<float*> buf = Take();
  if (!buf.ok()) {
    Fail(buf.status());
    return;
  }
  gathered_[unit] = *buf;
  prefetched_[unit] = true;
  absl::Status s = GatherUnit(unit, *buf);
  if (cudaError_t e = cudaEventRecord(ready_[unit], cur_); s.ok() && e != cudaSuccess) {
    s = CudaStatus(e, "cudaEventRecord", __FILE__, __LINE__);
  }
  if (!s.ok()) Fail(s);
}

void CudaDataParallel::ReleaseParams(int unit) {
  if (!sharded_params()) return;
  // The head is used again at once by backward: keep it (as FSDP keeps its root unit).
  if (training_ && !backward_ && unit + 1 == static_cast<int>(parts_.units.size())) return;
  Give(gathered_[unit]);
  gathered_[unit] = nullptr;
}

float* CudaDataParallel::AcquireGrads(int unit) {
  const UnitShard& u = parts_.units[unit];
  if (!sharded_params()) return full_grads_ + u.begin;
  absl::StatusOr<float*> buf = Take();
  if (!buf.ok()) {
    Fail(buf.status());
    return spare_;
  }
  unit_grads_[unit] = *buf;
  if (cudaError_t e = cudaMemsetAsync(*buf, 0, parts_.padded(unit) * sizeof(float), stream_);
      e != cudaSuccess) {
    Fail(CudaStatus(e, "cudaMemsetAsync", __FILE__, __LINE__));
  }
  return *buf;
}

void CudaDataParallel::GradsDone(int unit) {
  const UnitShard& u = parts_.units[unit];
  if (sharding_ == Sharding::kNoShard && (!last_micro_ || world_size_ == 1 || PowerSgdNow())) {
    return;  // nothing to reduce now (PowerSGD: in Reduce)
  }
  if (sharding_ == Sharding::kShardGradOp && !last_micro_) return;
  // no_shard: the bucket this unit completes (grad_buckets.h), the same ranges as the CPU's.
  const GradBucket* bucket = sharding_ == Sharding::kNoShard ? buckets_.LaunchedBy(unit) : nullptr;
  if (sharding_ == Sharding::kNoShard && bucket == nullptr) return;
  // The reduction overlaps the backward of the units before this one; Reduce joins.
  CommPhase phase(this);
  absl::Status s;
  switch (sharding_) {
    case Sharding::kNoShard:
      s = AllReduceGrads(*comms_.world, full_grads_ + bucket->begin, bucket->numel,
                         residual_ag_ != nullptr ? residual_ag_ + bucket->begin : nullptr);
      break;
    case Sharding::kShardGradOp: {
      absl::StatusOr<float*> buf = Take();
      if (!buf.ok()) {
        Fail(buf.status());
        return;
      }
      const size_t padded = parts_.padded(unit);
      cudaError_t e = cudaMemcpyAsync(*buf, full_grads_ + u.begin, u.numel * sizeof(float),
                                      cudaMemcpyDeviceToDevice, cur_);
      if (e == cudaSuccess && padded > u.numel) {
        e = cudaMemsetAsync(*buf + u.numel, 0, (padded - u.numel) * sizeof(float), cur_);
      }
      s = e == cudaSuccess ? ReduceScatterInto(unit, *buf, shard_grads_ + u.local)
                           : CudaStatus(e, "cudaMemcpyAsync", __FILE__, __LINE__);
      Give(*buf);
      break;
    }
    case Sharding::kFullShard:
    case Sharding::kHybridShard:
      if (unit_grads_[unit] == nullptr) return;  // AcquireGrads failed (already reported)
      s = ReduceScatterInto(unit, unit_grads_[unit], shard_grads_ + u.local);
      Give(unit_grads_[unit]);
      unit_grads_[unit] = nullptr;
      break;
  }
  if (!s.ok()) Fail(s);
}

void CudaDataParallel::RunEmptyMicroBatch(int num_units) {
  backward_ = false;
  RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/true, [this] { backward_ = true; });
}

void CudaDataParallel::RunEmptyForward(int num_units) {
  backward_ = false;
  RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/false, [] {});
}

absl::StatusOr<ReducedStep> CudaDataParallel::Reduce(double local_loss, float flag) {
  RM_RETURN_IF_ERROR(status());
  RM_RETURN_IF_ERROR(Join());  // the reductions of backward are done before anything reads them
  const bool hybrid = sharding_ == Sharding::kHybridShard;
  if (sharding_ == Sharding::kNoShard && world_size_ > 1 && PowerSgdNow()) {
    RM_RETURN_IF_ERROR(PowerSgdAllReduce(*comms_.world, full_grads_, n_));
  }
  if (hybrid && comms_.inter->size() > 1) {
    if (PowerSgdNow()) {
      RM_RETURN_IF_ERROR(PowerSgdAllReduce(*comms_.inter, shard_grads_, local_total_));
    } else {
      RM_RETURN_IF_ERROR(AllReduceGrads(*comms_.inter, shard_grads_, local_total_, residual_ag_));
    }
  }
  // Each element of the gradient counted once: rank 0 for replicated gradients, shard owners
  // otherwise (only node 0's under hybrid_shard, where every node holds the same shards).
  const bool counts = sharding_ == Sharding::kNoShard
                          ? comms_.world == nullptr || comms_.world->rank() == 0
                      : hybrid ? comms_.inter->rank() == 0
                               : true;
  double sq = 0;
  if (counts) {
    RM_CUDA_RETURN_IF_ERROR(
        GradSumSquares(update_grads(), update_size(), norm_scratch_, sum_sq_, stream_));
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(&sq, sum_sq_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  }
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  RM_RETURN_IF_ERROR(Settle());
  ReducedStep out{local_loss, sq, flag};
  if (world_size_ > 1) {
    RM_ASSIGN_OR_RETURN(out, SumOverRanks(out));
  }
  // Every collective of the step has completed and the host has waited for both streams (the
  // join above, then the compute stream): read their GPU time, with no wait of its own.
  RM_RETURN_IF_ERROR(CollectCommTime());
  return out;
}

absl::StatusOr<ReducedStep> CudaDataParallel::SumOverRanks(const ReducedStep& mine) {
  // Sum the three values in double, in rank order, identically on every rank: each rank's
  // values gathered as bytes (the collectives have no fp64 sum). Bookkeeping, not in the comm
  // figure; but the compute stream does nothing else meanwhile, so it is exposed.
  const size_t w = static_cast<size_t>(world_size_);
  const double values[3] = {mine.loss, mine.grad_sq, mine.flag_sum};
  const size_t need = sizeof(values) * (w + 1);
  RM_RETURN_IF_ERROR(ReserveSmall(need));
  std::vector<double> all(3 * w);
  auto* base = static_cast<unsigned char*>(small_);
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(base, values, sizeof(values), cudaMemcpyHostToDevice, stream_));
  RM_ASSIGN_OR_RETURN(const size_t timing, exposed_.Begin(stream_));
  Keep(comms_.world->AllGatherAsync(base, base + sizeof(values), sizeof(values), DataType::kBytes,
                                    stream()));
  RM_RETURN_IF_ERROR(exposed_.End(timing, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(all.data(), base + sizeof(values),
                                          all.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                          stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  RM_RETURN_IF_ERROR(Settle());
  ReducedStep out;
  for (size_t r = 0; r < w; ++r) {
    out.loss += all[3 * r];
    out.grad_sq += all[3 * r + 1];
    out.flag_sum += all[3 * r + 2];
  }
  return out;
}

absl::Status CudaDataParallel::ReserveSmall(size_t bytes) {
  if (small_bytes_ >= bytes) return absl::OkStatus();
  if (small_ != nullptr) cudaFree(small_);
  small_ = nullptr;
  small_bytes_ = 0;
  RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&small_, bytes));
  small_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status CudaDataParallel::PublishShards() {
  RM_ASSIGN_OR_RETURN(float* buf, Take());
  absl::Status s;
  for (int unit = 0; unit < static_cast<int>(parts_.units.size()) && s.ok(); ++unit) {
    const UnitShard& u = parts_.units[unit];
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

absl::Status CudaDataParallel::PowerSgdAllReduce(Communicator& comm, float* data, size_t total) {
  comm_.reduce_raw_bytes += AllReduceBytes(total, comm.size());
  comm_.reduce_wire_bytes += AllReduceBytes(powersgd_->wire_floats_per_call(), comm.size());
  RM_ASSIGN_OR_RETURN(const size_t timing, CommBegin());
  RM_RETURN_IF_ERROR(powersgd_->AllReduce(
      data, comm.size(),
      [&](float* d, size_t n) {
        return comm.AllReduceSumAsync(d, n, DataType::kFloat32, stream())->Wait();
      },
      cur_));
  return CommEnd(timing);
}

absl::Status CudaDataParallel::Update(int64_t step, double lr, const AdamWOptions& adam) {
  optimizer_step_ = step;
  float* params = sharding_ == Sharding::kNoShard ? full_params_ : shard_params_;
  RM_CUDA_RETURN_IF_ERROR(AdamWStep(params, update_grads(), exp_avg_, exp_avg_sq_, decay_mask_,
                                    update_size(), step, lr, adam.beta1, adam.beta2, adam.eps,
                                    adam.weight_decay, stream_));
  if (sharding_ != Sharding::kShardGradOp) return absl::OkStatus();
  return PublishShards();  // the updated shards into every rank's full parameters
}

absl::Status CudaDataParallel::AllReduceWorld(std::vector<float>* values) {
  RM_RETURN_IF_ERROR(Join());
  if (world_size_ == 1 || values->empty()) return absl::OkStatus();
  const size_t need = values->size() * sizeof(float);
  RM_RETURN_IF_ERROR(ReserveSmall(need));
  float* d = static_cast<float*>(small_);
  RM_RETURN_IF_ERROR(CopyToDevice(d, values->data(), values->size(), stream_));
  Keep(comms_.world->AllReduceSumAsync(d, values->size(), DataType::kFloat32, stream()));
  RM_RETURN_IF_ERROR(CopyToHost(values->data(), d, values->size(), stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Settle();
}

absl::Status CudaDataParallel::Barrier() {
  RM_RETURN_IF_ERROR(Join());
  if (world_size_ == 1) return absl::OkStatus();
  Keep(comms_.world->BarrierAsync(stream()));
  return Settle();
}

absl::Status CudaDataParallel::GatherFullParams(std::vector<float>* out) {
  RM_RETURN_IF_ERROR(Join());
  out->assign(n_, 0.0f);
  if (!sharded_params()) {
    RM_RETURN_IF_ERROR(CopyToHost(out->data(), full_params_, n_, stream_));
  } else {
    RM_ASSIGN_OR_RETURN(float* buf, Take());
    absl::Status s;
    for (int unit = 0; unit < static_cast<int>(parts_.units.size()) && s.ok(); ++unit) {
      const UnitShard& u = parts_.units[unit];
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

ShardRanges CudaDataParallel::SaveRanges() const {
  if (sharding_ == Sharding::kNoShard) {
    return comms_.world == nullptr ? EqualSlice(n_, 0, 1)
                                   : EqualSlice(n_, comms_.world->rank(), comms_.world->size());
  }
  // Under hybrid_shard node 0 writes; the other nodes hold the same shards.
  if (sharding_ == Sharding::kHybridShard && comms_.inter->rank() != 0) return {};
  return parts_.Owned();
}

ShardRanges CudaDataParallel::LoadRanges() const {
  if (sharding_ == Sharding::kNoShard) return EqualSlice(n_, 0, 1);
  return parts_.Owned();
}

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
  if (sharding_ == Sharding::kNoShard) {
    for (const auto& [b, e] : r.ranges) RM_RETURN_IF_ERROR(copy(b, e - b, full_params_));
  } else if (!r.ranges.empty()) {
    for (const UnitShard& u : parts_.units) {
      if (u.valid > 0) RM_RETURN_IF_ERROR(copy(u.local, u.valid, shard_params_));
    }
  }
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
        params.size(), exp_avg.size(), exp_avg_sq.size(), want, ShardingName(sharding_)));
  }
  size_t pos = 0;
  auto copy = [&](size_t to, size_t count, float* p) -> absl::Status {
    RM_RETURN_IF_ERROR(CopyToDevice(p + to, params.data() + pos, count, stream_));
    RM_RETURN_IF_ERROR(CopyToDevice(exp_avg_ + to, exp_avg.data() + pos, count, stream_));
    RM_RETURN_IF_ERROR(CopyToDevice(exp_avg_sq_ + to, exp_avg_sq.data() + pos, count, stream_));
    pos += count;
    return absl::OkStatus();
  };
  if (sharding_ == Sharding::kNoShard) {
    RM_RETURN_IF_ERROR(copy(0, n_, full_params_));
  } else {
    for (const UnitShard& u : parts_.units) {
      if (u.valid > 0) RM_RETURN_IF_ERROR(copy(u.local, u.valid, shard_params_));
    }
  }
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (sharding_ != Sharding::kShardGradOp) return absl::OkStatus();
  // shard_grad_op: rebuild the full parameters from the loaded shards (collective).
  RM_RETURN_IF_ERROR(PublishShards());
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Settle();
}

}  // namespace ringmaster::trainer::cuda
