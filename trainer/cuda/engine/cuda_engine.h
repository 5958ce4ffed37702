// The CUDA step engine (`train.device: cuda`): the training loop's StepEngine over one rank's
// CudaTrainerState. Checkpoints use the CPU engine's sharded format, layout and ranges (a run can
// stop on GPUs and resume on CPU ranks, at another world size, and the other way round), and the
// export gathers the same flat fp32 parameters.
//
// fp32 compute (TF32 GEMMs optionally), or bf16 / fp16 GEMM operands with fp32 master weights
// (autocast.h; fp16 with dynamic loss scaling, whose state the checkpoint's `extra` keeps).
// Several ranks (issue #19): the four sharding modes over communicators whose collectives take
// device buffers (NCCL), fp32 on the wire; gradient compression on the GPU is not wired yet.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/bert_config.h"
#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/model/bert_params.h"
#include "trainer/train/step_engine.h"

namespace ringmaster::trainer::cuda {

// OK when the current CUDA device can run `precision`'s GEMMs (bf16: compute capability >= 8.0,
// fp16: >= 7.0); otherwise InvalidArgument naming the precision, the device and its capability.
absl::Status CheckPrecisionOnDevice(GemmPrecision precision);
// "CUDA device 0, <name>, compute capability 9.0" (for the trainer's log).
std::string DeviceDescription();

class CudaEngine : public StepEngine {
 public:
  // `initial` holds layout.total parameters, the same on every rank. `comms`: the rank's
  // communicators (NCCL: collectives on device buffers); empty for a single process.
  static absl::StatusOr<std::unique_ptr<CudaEngine>> Create(const CudaTrainerOptions& options,
                                                            const BertConfig& config,
                                                            const ParamLayout& layout,
                                                            const float* initial,
                                                            const DataParallelComms& comms = {});

  int64_t num_params() const override { return static_cast<int64_t>(layout_.total); }

  void BeginStep() override;
  absl::StatusOr<float> TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) override;
  void EmptyMicroBatch(bool last_of_step) override;
  absl::StatusOr<StepTotals> FinishStep(double local_loss, double lr, double max_grad_norm,
                                        float flag) override;

  absl::StatusOr<ForwardOutput> EvalForward(const Batch& batch) override;
  void EmptyEvalForward() override;

  absl::Status status() const override;
  absl::Status AllReduceSum(std::vector<float>* values) override;
  absl::Status Barrier() override;

  absl::StatusOr<uint64_t> SaveCheckpoint(const std::string& output_dir,
                                          const CheckpointMeta& position, int keep) override;
  absl::StatusOr<LoadedShard> ReadCheckpoint(const std::string& dir) const override;
  absl::Status LoadCheckpoint(const LoadedShard& shard) override;

  absl::Status GatherFullParams(std::vector<float>* out) override;
  EngineFigures figures() const override;

 private:
  CudaEngine() = default;
  void Keep(const absl::Status& s) {
    if (!s.ok() && status_.ok()) status_ = s;
  }

  ParamLayout layout_;
  int rank_ = 0, world_size_ = 1;
  std::unique_ptr<CudaTrainerState> state_;
  absl::Status status_;        // first failure inside BeginStep / Empty* (which cannot return one)
  std::vector<float> logits_;  // EvalForward's, valid until the next call
};

}  // namespace ringmaster::trainer::cuda
