// The CPU step engine: BertModel<float> computing in fp32 over the data-parallel engine
// (trainer/parallel/data_parallel.h: sharding, gradient reduction and compression, AdamW,
// clipping), with RINGMASTER_SLOWDOWN's simulated slower device around each micro-batch's compute.
//
// Setting it up from a job takes three steps, because the job's settings are checked before
// anything is loaded and `compression: auto` needs the ranks connected:
//   CpuEngineOptionsFor      the job's settings as this rank resolved them (RankSettings,
//                            trainer/parallel/rank_settings.h: device, precision and codec
//                            are checked there, once);
//   ResolveAutoCompression   measures the links when compression is auto (collective);
//   CpuEngine::Create        once the model is loaded and the run's length is known.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/bert_config.h"
#include "jobspec/job_spec.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/parallel/data_parallel.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/parallel/rank_settings.h"
#include "trainer/train/slowdown.h"
#include "trainer/train/step_engine.h"

namespace ringmaster::trainer {

struct CpuEngineOptions {
  DataParallelOptions dp;
  bool auto_compression = false;  // `compression: auto`: dp.codec is decided by the links
  // The job's distributed.powersgd_start_step; -1: max(LR warmup, a tenth of the run).
  int64_t powersgd_start_step = -1;
  Slowdown slowdown;             // RINGMASTER_SLOWDOWN
  double slow_link_gbits = 5.0;  // RINGMASTER_SLOW_LINK_GBITS: compression auto's threshold
  // train.gradient_checkpointing: backward recomputes each encoder layer (bert_model.h).
  bool gradient_checkpointing = false;
};

// The CPU engine's options: the job's sharding, optimizer and bucket settings, and the rank's
// resolved codec and tuning (`settings`, whose device is cpu and precision fp32).
CpuEngineOptions CpuEngineOptionsFor(const JobSpec& job, const RankSettings& settings);

// `compression: auto`: on ranks spread over several nodes, rank 0 times an all-reduce and every
// rank takes its decision (int8 on a slow link, none otherwise); none on one node. Collective
// over dist.world(); no-op unless options->auto_compression.
absl::Status ResolveAutoCompression(DistContext& dist, CpuEngineOptions* options);

class CpuEngine : public StepEngine {
 public:
  // `initial` holds the full parameters of `layout`, identical on every rank. `total_steps`
  // and `warmup_steps` are the run's (PowerSGD's default start).
  static absl::StatusOr<std::unique_ptr<CpuEngine>> Create(
      const CpuEngineOptions& options, const BertConfig& config, const ParamLayout& layout,
      const float* initial, int64_t total_steps, int64_t warmup_steps, DistContext& dist);

  int64_t num_params() const override { return static_cast<int64_t>(layout_.total); }

  void BeginStep() override { dp_->BeginStep(); }
  absl::StatusOr<float> TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) override;
  void EmptyMicroBatch(bool last_of_step) override;
  absl::StatusOr<StepTotals> FinishStep(double local_loss, double lr, double max_grad_norm,
                                        float flag) override;

  absl::StatusOr<ForwardOutput> EvalForward(const Batch& batch) override;
  void EmptyEvalForward() override;

  absl::Status status() const override { return dp_->status(); }
  absl::Status AllReduceSum(std::vector<float>* values) override {
    return dp_->AllReduceWorld(values);
  }
  absl::Status Barrier() override { return dp_->Barrier(); }

  absl::StatusOr<uint64_t> SaveCheckpoint(const std::string& output_dir,
                                          const CheckpointMeta& position, int keep) override;
  absl::StatusOr<LoadedShard> ReadCheckpoint(const std::string& dir) const override;
  absl::Status LoadCheckpoint(const LoadedShard& shard) override;

  absl::Status GatherFullParams(std::vector<float>* out) override {
    return dp_->GatherFullParams(out);
  }
  EngineFigures figures() const override;

 private:
  CpuEngine(const BertConfig& config, const ParamLayout& layout, const Slowdown& slowdown,
            bool gradient_checkpointing, int rank, int world_size);

  ParamLayout layout_;
  Slowdown slowdown_;
  int rank_ = 0, world_size_ = 1;
  std::unique_ptr<BertModel<float>> net_;
  std::unique_ptr<DataParallel> dp_;
};

}  // namespace ringmaster::trainer
