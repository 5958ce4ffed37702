// The CPU data-parallel engine: the strategies, units and compression of sharding_plan.h over
// host buffers, its collectives issued on a communication thread (CommQueue) so that they
// overlap compute. Backend-independent: it talks only to the Communicator interface (Gloo on CPU
// today), so the same code runs every strategy at any world size, including 1.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"
#include "trainer/comm/comm_queue.h"
#include "trainer/comm/communicator.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/compression.h"
#include "trainer/parallel/grad_buckets.h"
#include "trainer/parallel/sharding_plan.h"
#include "trainer/parallel/unit_pass.h"
#include "trainer/parallel/unit_shards.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {

using jobspec::Compression;

struct DataParallelOptions {
  Sharding sharding = Sharding::kNoShard;
  WireCodec codec = WireCodec::kNone;  // casts / int8 on gradient reductions
  bool powersgd = false;
  int powersgd_rank = 4;
  // Optimizer steps all-reduced exactly before PowerSGD takes over (as PyTorch's
  // start_powerSGD_iter: early gradients change too fast for a warm-started low-rank basis).
  int64_t powersgd_start_step = 0;
  // All-reduces of replicated gradients (no_shard; hybrid_shard across nodes) skip 256-value
  // blocks that are zero on every rank (lossless; see TwoStageAllReduce), for every codec. An
  // uncompressed all-reduce found dense uses the backend's all-reduce. Every rank must agree.
  bool skip_zero_blocks = true;
  // no_shard: bytes of gradients per all-reduce bucket (grad_buckets.h); 0 = one per unit.
  size_t bucket_cap_bytes = 0;
  AdamWOptions adam;
  uint64_t seed = 0;  // PowerSGD's initial Q
};

// The job's distributed.compression as options: a wire codec, or PowerSGD with factors of rank
// `powersgd_rank`; auto leaves the codec none, for the trainer to decide once the ranks can
// measure their links. The one place the job-level setting maps to a WireCodec.
void SetCompression(Compression compression, int powersgd_rank, DataParallelOptions* options);

// Bytes sent by this rank per operation kind: what the data would take in fp32 ("raw") and what
// went on the wire.
struct CommCounters {
  std::atomic<uint64_t> gather_bytes{0};
  std::atomic<uint64_t> reduce_raw_bytes{0}, reduce_wire_bytes{0};
};

struct MemoryStats {
  size_t persistent_bytes = 0;  // parameters + gradients + AdamW state (+ residuals) held always
  size_t peak_transient_bytes = 0;  // gathered units + unit gradients + comm scratch, peak
};

class DataParallel : public UnitPass {
 public:
  // `initial` holds the full parameters (layout.total), identical on every rank.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(const ParamLayout& layout,
                                                              const DataParallelOptions& options,
                                                              const DataParallelComms& comms,
                                                              const float* initial);
  ~DataParallel() override;

  // Step protocol: BeginStep, then each micro-batch's pass (UnitPass), then FinishStep.
  void BeginStep();

  struct StepResult {
    double loss = 0;       // global mean loss of the step (sum of the ranks' weighted parts)
    double grad_norm = 0;  // global L2 norm before clipping
    double flag_sum = 0;   // sum over ranks of `flag` (e.g. how many ranks were asked to stop)
  };
  // Finishes the reductions, then clipping, AdamW with `lr`, and parameter publication.
  // `local_loss` is this rank's Σ loss·weight.
  absl::StatusOr<StepResult> FinishStep(double local_loss, double lr, double max_grad_norm,
                                        float flag = 0);

  // Sum over all ranks of `values` (small vectors: metrics, eval counts).
  absl::Status AllReduceWorld(std::vector<float>* values);
  absl::Status Barrier();

  // The full parameters, gathered (collective).
  absl::Status GatherFullParams(std::vector<float>* out);

  // Checkpoint pieces: the ranges this rank writes (together they tile the layout exactly) and
  // their parameters and AdamW moments, compacted.
  ShardRanges SaveRanges() const;
  void CopyForSave(std::vector<float>* params, std::vector<float>* exp_avg,
                   std::vector<float>* exp_avg_sq) const;
  // What this rank holds (to read from a checkpoint written at any world size), and loading it.
  ShardRanges LoadRanges() const;
  absl::Status LoadFrom(const LoadedShard& shard, int64_t optimizer_step);
  int64_t optimizer_step() const { return opt_->step(); }

  MemoryStats memory() const;
  const CommCounters& counters() const { return counters_; }
  const DataParallelOptions& options() const { return options_; }

  // UnitAccess.
  const float* AcquireParams(int unit) override;
  void ReleaseParams(int unit) override;
  float* AcquireGrads(int unit) override;
  void GradsDone(int unit) override;

 private:
  using Unit = UnitShard;

  DataParallel(const ParamLayout& layout, const DataParallelOptions& options, ShardingPlan plan);
  bool PowerSgdNow() const;  // PowerSGD configured and past its start step
  const ShardingTraits& traits() const { return plan_.traits(); }
  const std::vector<Unit>& units() const { return plan_.units(); }
  Communicator* group() const { return plan_.group(); }
  int group_size() const { return plan_.parts().group_size; }
  // The gradients AdamW updates: the full ones, or the local shards.
  std::vector<float>& update_grads() { return traits().shard_grads ? shard_grads_ : full_grads_; }
  // Full params from the shards; `count`: in the gather bytes (the step's publication).
  absl::Status GatherShards(std::vector<float>* out, bool count = false);
  void IssueGather(int unit);
  void WaitGather(int unit);
  // Reduce-scatters `padded` (shard·group floats of unit `unit`) into the unit's shard of
  // shard_grads_ (accumulating), with the configured codec.
  absl::Status ReduceScatterUnit(int unit, const float* padded);
  // Sum-all-reduce of data[0..n) over `comm` with the configured codec; residuals and
  // zero-block skipping state by key (AllReduceKeys). Counts raw and wire bytes.
  absl::Status CompressedAllReduce(Communicator* comm, float* data, size_t n, int key);
  // The same with `codec`, counting wire bytes only.
  absl::Status ReplicatedAllReduce(Communicator* comm, WireCodec codec, float* data, size_t n,
                                   int key);
  // PowerSGD over `comm` on grads (PowerSgd::raw_floats()), its all-reduces skipping zero blocks.
  absl::Status PowerSgdAllReduce(Communicator* comm, float* grads);
  void Track(ptrdiff_t delta);

  ParamLayout layout_;
  DataParallelOptions options_;
  ShardingPlan plan_;

  // Persistent state.
  std::vector<float> full_params_, full_grads_;    // no_shard, shard_grad_op
  std::vector<float> shard_params_, shard_grads_;  // every strategy but no_shard
  std::unique_ptr<AdamW> opt_;
  std::vector<std::vector<float>> residual_rs_;  // int8 error feedback, per unit (padded)
  std::vector<std::vector<float>> residual_ag_;  // int8 error feedback of all-reduces, per key
  std::unique_ptr<PowerSgd> powersgd_;

  // Per-unit transient state (full_shard / hybrid_shard).
  std::vector<std::vector<float>> gathered_;
  std::vector<std::shared_ptr<Work>> gather_work_;
  std::vector<std::vector<float>> unit_grads_;
  std::vector<std::shared_ptr<Work>> reduce_work_;
  std::vector<float> padded_scratch_;  // shard_grad_op: a unit's gradients, padded
  TwoStageScratch allreduce_scratch_;  // CompressedAllReduce's buffers (communication thread)
  ZeroBlockSkip skip_;                 // per all-reduce key (communication thread)

  std::atomic<int64_t> transient_bytes_{0};
  std::atomic<int64_t> peak_transient_bytes_{0};
  CommCounters counters_;
  CommQueue queue_;  // last: its worker stops before the buffers above go away
};

}  // namespace ringmaster::trainer
