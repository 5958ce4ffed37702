// CudaDataParallel as the model's UnitAccess (cuda_data_parallel.h): a unit's parameters
// gathered (and the next unit prefetched) under full_shard and hybrid_shard, its gradient buffer,
// and the reduction each unit's finished gradients launch during backward.
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/parallel/cuda_data_parallel.h"

namespace ringmaster::trainer::cuda {

absl::Status CudaDataParallel::GatherUnit(int unit, float* out) {
  const UnitShard& u = parts().units[unit];
  const float* mine = shard_params_ + u.local;
  if (group()->size() == 1) {
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(out, mine, u.shard * sizeof(float), cudaMemcpyDeviceToDevice, cur_));
    return absl::OkStatus();
  }
  comm_.gather_bytes += u.shard * sizeof(float) * static_cast<uint64_t>(group()->size() - 1);
  Issue([&] { return group()->AllGatherAsync(mine, out, u.shard, DataType::kFloat32, stream()); });
  return absl::OkStatus();
}

const float* CudaDataParallel::AcquireParams(int unit) {
  const UnitShard& u = parts().units[unit];
  if (!traits().shard_params) return full_params_ + u.begin;
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
  } else if (unit + 1 < plan_.num_units()) {
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
  if (!traits().shard_params) return;
  // The head is used again at once by backward: keep it (as FSDP keeps its root unit).
  if (training_ && !backward_ && unit + 1 == plan_.num_units()) return;
  Give(gathered_[unit]);
  gathered_[unit] = nullptr;
}

float* CudaDataParallel::AcquireGrads(int unit) {
  const UnitShard& u = parts().units[unit];
  if (traits().full_grads()) return full_grads_ + u.begin;
  absl::StatusOr<float*> buf = Take();
  if (!buf.ok()) {
    Fail(buf.status());
    return spare_;
  }
  unit_grads_[unit] = *buf;
  if (cudaError_t e = cudaMemsetAsync(*buf, 0, parts().padded(unit) * sizeof(float), stream_);
      e != cudaSuccess) {
    Fail(CudaStatus(e, "cudaMemsetAsync", __FILE__, __LINE__));
  }
  return *buf;
}

void CudaDataParallel::GradsDone(int unit) {
  const UnitShard& u = parts().units[unit];
  if (!plan_.ReducesIn(last_micro_) || world_size_ == 1) return;
  // no_shard: the bucket this unit completes (grad_buckets.h), the same ranges as the CPU's;
  // nothing now under PowerSGD (in Reduce).
  const GradBucket* bucket = nullptr;
  if (!traits().shard_grads) {
    bucket = PowerSgdNow() ? nullptr : plan_.buckets().LaunchedBy(unit);
    if (bucket == nullptr) return;
  }
  // The reduction overlaps the backward of the units before this one; Reduce joins.
  CommPhase phase(this);
  absl::Status s;
  if (bucket != nullptr) {
    s = AllReduceGrads(*plan_.comms().world, full_grads_ + bucket->begin, bucket->numel,
                       residual_ag_ != nullptr ? residual_ag_ + bucket->begin : nullptr,
                       AllReduceKeys::Bucket(unit));
  } else if (traits().full_grads()) {  // the unit's part of the full gradients, padded
    absl::StatusOr<float*> buf = Take();
    if (!buf.ok()) {
      Fail(buf.status());
      return;
    }
    const size_t padded = parts().padded(unit);
    cudaError_t e = cudaMemcpyAsync(*buf, full_grads_ + u.begin, u.numel * sizeof(float),
                                    cudaMemcpyDeviceToDevice, cur_);
    if (e == cudaSuccess && padded > u.numel) {
      e = cudaMemsetAsync(*buf + u.numel, 0, (padded - u.numel) * sizeof(float), cur_);
    }
    s = e == cudaSuccess ? ReduceScatterInto(unit, *buf, shard_grads_ + u.local)
                         : CudaStatus(e, "cudaMemcpyAsync", __FILE__, __LINE__);
    Give(*buf);
  } else {
    if (unit_grads_[unit] == nullptr) return;  // AcquireGrads failed (already reported)
    s = ReduceScatterInto(unit, unit_grads_[unit], shard_grads_ + u.local);
    Give(unit_grads_[unit]);
    unit_grads_[unit] = nullptr;
  }
  if (!s.ok()) Fail(s);
}

}  // namespace ringmaster::trainer::cuda
