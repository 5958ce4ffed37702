// CudaDataParallel's collectives (cuda_data_parallel.h): each timed with events on the stream
// it runs on, the gradient reductions (reduce-scatter, all-reduce, each plain or compressed, and
// PowerSGD), the step's reduction and sums over ranks, and the collectives on host values.
#include <vector>

#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/kernels/wire_codec.h"
#include "trainer/cuda/parallel/cuda_data_parallel.h"
#include "trainer/cuda/parallel/cuda_data_parallel_copies.h"

namespace ringmaster::trainer::cuda {
namespace {

// Bytes a ring all-reduce of `floats` sends from each of g ranks: 2(g-1)/g of them.
uint64_t AllReduceBytes(size_t floats, int g) {
  return 2 * floats * sizeof(float) * static_cast<uint64_t>(g - 1) / static_cast<uint64_t>(g);
}

using data_parallel_internal::CopyToDevice;
using data_parallel_internal::CopyToHost;

}  // namespace

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
  // Before Collect, which hands the events on to the next intervals.
  last_join_lag_seconds_.reset();
  if (join_wait_.has_value()) {
    float ms = 0;
    RM_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&ms, to_compute_, exposed_.end_event(*join_wait_)));
    last_join_lag_seconds_ = ms * 1e-3;
    join_wait_.reset();
  }
  RM_ASSIGN_OR_RETURN(const std::vector<double> exposed, exposed_.Collect());
  for (double s : exposed) exposed_seconds += s;
  last_comm_seconds_ = seconds;
  comm_seconds_total_ += seconds;
  last_exposed_seconds_ = exposed_seconds;
  exposed_seconds_total_ += exposed_seconds;
  return absl::OkStatus();
}

absl::Status CudaDataParallel::ReduceScatterInto(int unit, const float* padded, float* out) {
  const UnitShard& u = parts().units[unit];
  const int g = group()->size();
  if (g == 1) {
    RM_CUDA_RETURN_IF_ERROR(AddInPlace(out, padded, u.shard, cur_));
    return absl::OkStatus();
  }
  const uint64_t bytes = u.shard * sizeof(float) * static_cast<uint64_t>(g - 1);
  comm_.reduce_raw_bytes += bytes;
  if (codec_ == WireCodec::kNone) {
    comm_.reduce_wire_bytes += bytes;
    Issue([&] {
      return group()->ReduceScatterSumAsync(padded, reduced_, u.shard, DataType::kFloat32,
                                            stream());
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
  Issue([&] { return group()->AllToAllAsync(send_, recv_, stride_, DataType::kBytes, stream()); });
  for (int r = 0; r < g; ++r) {
    RM_CUDA_RETURN_IF_ERROR(WireDecodeAdd(codec_, recv_ + r * stride_, u.shard, out, cur_));
  }
  return absl::OkStatus();
}

absl::Status CudaDataParallel::AllReduceGrads(Communicator& comm, float* data, size_t n,
                                              float* residual, int key) {
  comm_.reduce_raw_bytes += AllReduceBytes(n, comm.size());
  RM_ASSIGN_OR_RETURN(const size_t timing, CommBegin());
  RM_RETURN_IF_ERROR(ReplicatedAllReduce(comm, codec_, data, n, residual, key, /*wait=*/false));
  return CommEnd(timing);
}

absl::Status CudaDataParallel::ReplicatedAllReduce(Communicator& comm, WireCodec codec, float* data,
                                                   size_t n, float* residual, int key, bool wait) {
  const int g = comm.size();
  const bool skip = skip_.Skip(key, g);
  if (ZeroBlockSkip::Plain(codec, skip, g)) {
    // Uncompressed and dense: the backend's own all-reduce.
    skip_.Record(key, false, {});
    comm_.reduce_wire_bytes += AllReduceBytes(n, g);
    std::shared_ptr<Work> w = comm.AllReduceSumAsync(data, n, DataType::kFloat32, stream());
    if (wait) return w->Wait();
    Keep(std::move(w));
    return absl::OkStatus();
  }
  TwoStageStats stats;
  RM_RETURN_IF_ERROR(
      DeviceTwoStageAllReduce(codec, comm, data, n, residual, skip, *two_stage_, cur_, &stats));
  comm_.reduce_wire_bytes += stats.wire_bytes;
  skip_.Record(key, skip, stats);
  return absl::OkStatus();
}

absl::Status CudaDataParallel::PowerSgdAllReduce(Communicator& comm, float* data, size_t total) {
  comm_.reduce_raw_bytes += AllReduceBytes(total, comm.size());
  RM_ASSIGN_OR_RETURN(const size_t timing, CommBegin());
  // Its all-reduces (exact part, P, Q') uncompressed, skipping zero blocks by call position, as
  // on the CPU engine.
  int call = 0;
  RM_RETURN_IF_ERROR(powersgd_->AllReduce(
      data, comm.size(),
      [&](float* d, size_t n) {
        return ReplicatedAllReduce(comm, WireCodec::kNone, d, n, nullptr,
                                   AllReduceKeys::PowerSgd(plan_.num_units(), call++),
                                   /*wait=*/true);
      },
      cur_));
  return CommEnd(timing);
}

absl::StatusOr<ReducedStep> CudaDataParallel::Reduce(double local_loss, float flag) {
  RM_RETURN_IF_ERROR(status());
  RM_RETURN_IF_ERROR(Join());  // the reductions of backward are done before anything reads them
  // Replicated reductions not overlapped with backward: PowerSGD's (over the world or across
  // nodes), hybrid_shard's across nodes.
  Communicator* replica = plan_.replica_comm();
  if (PowerSgdNow()) {
    RM_RETURN_IF_ERROR(PowerSgdAllReduce(*replica, update_grads(), update_size()));
  } else if (traits().replicate_across_nodes && replica->size() > 1) {
    RM_RETURN_IF_ERROR(AllReduceGrads(*replica, update_grads(), update_size(), residual_ag_,
                                      AllReduceKeys::CrossNode(plan_.num_units())));
  }
  // Each element of the gradient counted once (ShardingPlan::CountsInNorm).
  double sq = 0;
  if (plan_.CountsInNorm()) {
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
  Keep(plan_.comms().world->AllGatherAsync(base, base + sizeof(values), sizeof(values),
                                           DataType::kBytes, stream()));
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

absl::Status CudaDataParallel::AllReduceWorld(std::vector<float>* values) {
  RM_RETURN_IF_ERROR(Join());
  if (world_size_ == 1 || values->empty()) return absl::OkStatus();
  const size_t need = values->size() * sizeof(float);
  RM_RETURN_IF_ERROR(ReserveSmall(need));
  float* d = static_cast<float*>(small_);
  RM_RETURN_IF_ERROR(CopyToDevice(d, values->data(), values->size(), stream_));
  Keep(plan_.comms().world->AllReduceSumAsync(d, values->size(), DataType::kFloat32, stream()));
  RM_RETURN_IF_ERROR(CopyToHost(values->data(), d, values->size(), stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Settle();
}

absl::Status CudaDataParallel::Barrier() {
  RM_RETURN_IF_ERROR(Join());
  if (world_size_ == 1) return absl::OkStatus();
  Keep(plan_.comms().world->BarrierAsync(stream()));
  return Settle();
}

}  // namespace ringmaster::trainer::cuda
