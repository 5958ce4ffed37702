// The CUDA engine's parameters, gradients and AdamW state, held on one device and, with several
// ranks, sharded FSDP-style over a communicator whose collectives take device buffers (NCCL):
// the strategies, units, compression and checkpoint ranges of trainer/parallel/sharding_plan.h
// (ShardingPlan, shared with the CPU engine) over device buffers, codecs encoded on the GPU
// (kernels/wire_codec.h, device_two_stage_allreduce.h, device_powersgd.h). A world of one holds
// everything (no_shard) and issues no collective.
//
// Streams: compute is enqueued on the stream given; with several ranks, the gradient
// reductions of backward and the all-gathers of full_shard's units run on a communication
// stream of their own, so a unit's reduction overlaps the backward of the units before it.
// Each such "comm phase" first makes the communication stream wait for the compute issued so far
// (an event); the compute stream waits for the communication stream (a "join") only where it
// reads what communication wrote: a gathered unit at once, the reduced gradients at Reduce, and a
// pooled buffer communication still uses. Collectives outside phases (Reduce's sums,
// shard_grad_op's publishing, checkpoints) run on the compute stream after a join. So every
// collective of the communicator is ordered after the previous one on the device, as NCCL needs.
// Each of those waits is timed on the compute stream (GpuIntervals::TimedWait): with the
// collectives that run on the compute stream, that is the step's exposed communication.
// The host never waits for a collective it issues: their Works are kept and settled (waited for,
// errors surfaced) at the step's reduction and the other host synchronisation points. Checked under
// the emulator's lazy streams (docs/cuda.md), which run a stream's work only when something waits
// for it, so a missing wait gives wrong gradients there. full_shard and hybrid_shard gather the
// next unit while the current one computes, in forward and in backward (FSDP's prefetch: one
// more pooled buffer in use).
//
// Errors inside a pass (UnitAccess cannot return one) are kept: status() and the next
// reduction report the first.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trainer_metrics.h"
#include "trainer/comm/communicator.h"
#include "trainer/cuda/parallel/device_powersgd.h"
#include "trainer/cuda/parallel/device_two_stage_allreduce.h"
#include "trainer/cuda/parallel/gpu_intervals.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/data_parallel.h"  // SetCompression, for the engine factory
#include "trainer/parallel/grad_buckets.h"
#include "trainer/parallel/sharding_plan.h"
#include "trainer/parallel/unit_pass.h"
#include "trainer/parallel/unit_shards.h"
#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer::cuda {

// How the gradient reductions are compressed (the job's distributed.compression).
struct CudaCompression {
  WireCodec codec = WireCodec::kNone;
  bool powersgd = false;
  int powersgd_rank = 4;
  int64_t powersgd_start_step = 0;  // optimizer steps all-reduced exactly first
  uint64_t seed = 0;                // PowerSGD's initial Q
  // All-reduces skip 256-value blocks zero on every rank (distributed.skip_zero_blocks).
  bool skip_zero_blocks = true;
};

// What the ranks' reductions of one step add up to.
struct ReducedStep {
  double loss = 0;      // Σ over ranks of their local Σ loss·weight
  double grad_sq = 0;   // Σ of the squared reduced gradients, each element counted once
  double flag_sum = 0;  // Σ over ranks of their flags
};

class CudaDataParallel : public UnitPass {
 public:
  // `initial`: layout.total parameters (host), the same on every rank. `comms.world` null: a
  // world of one. Buffers are device memory of the current device; `stream` must outlive this.
  static absl::StatusOr<std::unique_ptr<CudaDataParallel>> Create(
      const ParamLayout& layout, Sharding sharding, const DataParallelComms& comms,
      const std::vector<float>& initial, cudaStream_t stream,
      const CudaCompression& compression = {}, size_t bucket_cap_bytes = 0);
  ~CudaDataParallel() override;
  CudaDataParallel(const CudaDataParallel&) = delete;
  CudaDataParallel& operator=(const CudaDataParallel&) = delete;

  Sharding sharding() const { return plan_.sharding(); }
  int world_size() const { return world_size_; }

  // Step protocol (as DataParallel's): BeginStep; each micro-batch's pass (UnitPass); then
  // Reduce and Update.
  absl::Status BeginStep();  // zeroes the gradients (enqueued)

  // Waits for the collectives issued so far; their first failure.
  absl::Status Settle();

  // Collective. Completes the step's gradient reductions and sums over ranks `local_loss`,
  // the squares of the reduced gradients and `flag`. Reads back to the host (synchronises).
  absl::StatusOr<ReducedStep> Reduce(double local_loss, float flag);
  // The reduced gradients this rank updates: full (no_shard) or its shards (device).
  float* update_grads() { return traits().shard_grads ? shard_grads_ : full_grads_; }
  size_t update_size() const { return plan_.update_size(); }
  // AdamW step `step` (1-based) with `lr` on this rank's part, then (shard_grad_op) the updated
  // shards all-gathered into the full parameters. Collective for shard_grad_op.
  absl::Status Update(int64_t step, double lr, const AdamWOptions& adam);
  // The optimizer's step after a checkpoint load (PowerSGD starts by it).
  void set_optimizer_step(int64_t step) { optimizer_step_ = step; }

  // Collective. Sum over ranks of a few host values (staged through device memory).
  absl::Status AllReduceWorld(std::vector<float>* values);
  absl::Status Barrier();
  // Collective (under full_shard / hybrid_shard). The full parameters, on the host.
  absl::Status GatherFullParams(std::vector<float>* out);

  // Checkpoints: what this rank writes (the ranges tile the layout over the ranks) and what it
  // needs to resume, the same ranges as the CPU engine's for the same sharding and world.
  ShardRanges SaveRanges() const;
  ShardRanges LoadRanges() const;
  // Host copies of SaveRanges' parameters and moments, compacted in range order.
  absl::Status CopyForSave(std::vector<float>* params, std::vector<float>* exp_avg,
                           std::vector<float>* exp_avg_sq) const;
  // Takes LoadRanges' values (compacted). Collective for shard_grad_op (rebuilds the full
  // parameters from the shards).
  absl::Status LoadFrom(const std::vector<float>& params, const std::vector<float>& exp_avg,
                        const std::vector<float>& exp_avg_sq);

  // GPU time inside collectives (CUDA events around each on the stream it runs on): the
  // collectives completed by the last Reduce since the one before it, and since the start. The
  // reductions of backward run on the communication stream, so part of it overlaps compute.
  double last_comm_seconds() const { return last_comm_seconds_; }
  double comm_seconds_total() const { return comm_seconds_total_; }
  // Exposed communication, the part not hidden behind compute: GPU time the compute stream spent
  // waiting for the communication stream (an event recorded just before each such wait and one
  // just after) plus the collectives that ran on the compute stream itself (Reduce's, the step's
  // sums, shard_grad_op's publishing, GatherFullParams'), for the same steps as above. Zero in a
  // world of one.
  double last_exposed_comm_seconds() const { return last_exposed_seconds_; }
  double exposed_comm_seconds_total() const { return exposed_seconds_total_; }
  // A check of that measurement (tests read it): for the last join before the last Reduce read
  // the figures (Reduce's own), the time from the event the compute stream waited for (recorded
  // on the communication stream) to the end of the timed wait. Never negative when the wait is
  // timed (the stall ends after what it waits for); under the emulator's lazy streams that event
  // is recorded only when the wait runs the communication stream, so a wait's end recorded before
  // the wait makes it negative. None when no join was read (a world of one).
  std::optional<double> last_join_lag_seconds() const { return last_join_lag_seconds_; }

  size_t persistent_bytes() const { return persistent_bytes_; }
  size_t pooled_bytes() const;  // gathered units, unit gradients, scratch: allocated so far
  const CommTotals& comm_totals() const { return comm_; }

  // UnitAccess (device pointers).
  const float* AcquireParams(int unit) override;
  void ReleaseParams(int unit) override;
  float* AcquireGrads(int unit) override;
  void GradsDone(int unit) override;

 private:
  CudaDataParallel() = default;
  const ShardingTraits& traits() const { return plan_.traits(); }
  const UnitShards& parts() const { return plan_.parts(); }
  Communicator* group() const { return plan_.group(); }
  CommStream stream() const { return CommStream(cur_); }
  // A comm phase: from construction, collective work is enqueued on the communication stream,
  // after the compute issued so far; on destruction back to the compute stream (no join).
  class CommPhase {
   public:
    explicit CommPhase(CudaDataParallel* dp);
    ~CommPhase();

   private:
    CudaDataParallel* dp_;
  };
  absl::Status Join();  // the compute stream waits for the communication issued so far (timed)
  void Keep(std::shared_ptr<Work> w) { pending_.push_back(std::move(w)); }
  // Issues a collective (Keep's its Work) between two timing events on the stream.
  void Issue(const std::function<std::shared_ptr<Work>()>& issue);
  absl::StatusOr<size_t> CommBegin();  // records a pair's first event; the pair's index
  absl::Status CommEnd(size_t timing);
  // Sums the recorded intervals into the comm and exposed figures (waits for them).
  absl::Status CollectCommTime();
  // Reduce's sum over ranks of each rank's three values (collective, synchronises).
  absl::StatusOr<ReducedStep> SumOverRanks(const ReducedStep& mine);
  absl::StatusOr<float*> Take();  // a pooled buffer of max_padded_ floats
  void Give(float* p);            // back to the pool (stream order keeps reuse safe)
  absl::Status GatherUnit(int unit, float* out);  // all-gather unit's shards into `out` (padded)
  // Gathers `unit` on the communication stream (unless already there), recording ready_[unit].
  void Prefetch(int unit);
  absl::Status ReduceScatterInto(int unit, const float* padded, float* out);
  // shard_grad_op: all-gathers every unit's shard into the full parameters (collective).
  absl::Status PublishShards();
  absl::Status ReserveSmall(size_t bytes);  // small_ holds at least `bytes`
  // Sum-all-reduce of data[0..n) over `comm` (compressed with the codec, the int8 residual at
  // `residual`, zero blocks skipped by key: AllReduceKeys), timed, counting bytes.
  absl::Status AllReduceGrads(Communicator& comm, float* data, size_t n, float* residual, int key);
  // The same with `codec`, untimed, counting wire bytes only; `wait`: the host waits for a
  // plain all-reduce's Work (the two-stage one always waits).
  absl::Status ReplicatedAllReduce(Communicator& comm, WireCodec codec, float* data, size_t n,
                                   float* residual, int key, bool wait);

  ShardingPlan plan_;
  int world_size_ = 1;
  cudaStream_t stream_ = nullptr;       // compute
  cudaStream_t comm_stream_ = nullptr;  // communication (world > 1)
  cudaStream_t cur_ = nullptr;          // where collective work goes now: one of the two
  cudaEvent_t to_comm_ = nullptr, to_compute_ = nullptr;
  uint64_t phases_ = 0,
           joined_ = 0;  // comm phases begun; the last one the compute stream waited for
  size_t n_ = 0;
  size_t max_padded_ = 0;

  // Device buffers (null where the strategy has none).
  float *full_params_ = nullptr, *full_grads_ = nullptr;
  float *shard_params_ = nullptr, *shard_grads_ = nullptr;
  float *exp_avg_ = nullptr, *exp_avg_sq_ = nullptr;    // update_size() floats
  uint8_t* decay_mask_ = nullptr;                       // update_size() bytes
  float* reduced_ = nullptr;                            // a unit's reduce-scatter output
  double *norm_scratch_ = nullptr, *sum_sq_ = nullptr;  // GradSumSquares' scratch and result
  float* spare_ = nullptr;  // handed out when the pool cannot grow (the failure is kept)
  // Compression: int8's residuals (reduce-scatter: each unit's padded size at local·g; the
  // all-reduces: no_shard's per bucket at its flat offset, hybrid_shard's over the shards), the
  // encoded blocks of a reduce-scatter (g slots of stride_ bytes, 4-byte aligned), the two-stage
  // all-reduce's buffers.
  WireCodec codec_ = WireCodec::kNone;
  CudaCompression compression_;
  std::unique_ptr<DevicePowerSgd> powersgd_;
  int64_t optimizer_step_ = 0;
  bool PowerSgdNow() const {
    return powersgd_ != nullptr && optimizer_step_ >= compression_.powersgd_start_step;
  }
  // PowerSGD's all-reduce of data (its `total` floats) over `comm`, timed and counted.
  absl::Status PowerSgdAllReduce(Communicator& comm, float* data, size_t total);
  float *residual_rs_ = nullptr, *residual_ag_ = nullptr;
  uint8_t *send_ = nullptr, *recv_ = nullptr;
  size_t stride_ = 0;
  std::unique_ptr<DeviceTwoStageScratch> two_stage_;
  ZeroBlockSkip skip_{false, 0};
  void* small_ = nullptr;  // staging for host values
  size_t small_bytes_ = 0;
  size_t persistent_bytes_ = 0;

  // Free pooled buffers, each with the comm phase that last used it (0: none since a join).
  std::vector<std::pair<float*, uint64_t>> pool_;
  std::vector<float*> all_pooled_;
  std::vector<float*> gathered_, unit_grads_;  // per unit: pooled buffers in use
  // Prefetch (full_shard, hybrid_shard): a unit gathered ahead on the communication stream, and
  // the event its gather recorded there, which the compute stream waits for.
  std::vector<bool> prefetched_;
  std::vector<cudaEvent_t> ready_;
  std::vector<std::shared_ptr<Work>> pending_;
  GpuIntervals comm_time_;             // around each timed collective, on its stream
  std::vector<bool> comm_on_compute_;  // per comm_time_ interval: it ran on the compute stream
  GpuIntervals exposed_;               // on the compute stream, counted whole as exposed
  std::optional<size_t> join_wait_;    // exposed_'s interval of the last join's wait, if any
  std::optional<double> last_join_lag_seconds_;
  double last_comm_seconds_ = 0, comm_seconds_total_ = 0;
  double last_exposed_seconds_ = 0, exposed_seconds_total_ = 0;
  CommTotals comm_;
};

}  // namespace ringmaster::trainer::cuda
