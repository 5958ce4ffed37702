// One rank's training state for the CUDA engine: the CUDA BERT, its parameters, gradients and
// AdamW moments in the CPU engine's flat layout (so checkpoints and the Hugging Face export are
// shared) held by CudaDataParallel (cuda_data_parallel.h: whole on one device, or sharded over
// the ranks' devices), and the step protocol the loop drives:
//   BeginStep (zero gradients) → ForwardBackward per micro-batch (gradients accumulate with the
//   micro-batch's loss weight; the last one's are reduced over the ranks as backward produces
//   them) → FinishStep (global norm, clipping, AdamW with the loop's LR).
// Everything runs on one stream; the host waits only for each micro-batch's loss and the step's
// reduced sums, which the loop needs for logging and divergence checks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trainer_metrics.h"
#include "jobspec/bert_config.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/model/bert_cuda_model.h"
#include "trainer/cuda/parallel/cuda_data_parallel.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"

namespace ringmaster::trainer::cuda {

struct CudaTrainerOptions {
  AdamWOptions adam;
  // How the state is split over the ranks (a world of one holds everything).
  Sharding sharding = Sharding::kNoShard;
  // How the gradient reductions between ranks are compressed (cuda_data_parallel.h).
  CudaCompression compression;
  // no_shard: bytes of gradients per all-reduce bucket (trainer/parallel/grad_buckets.h); 0 = a
  // unit.
  size_t bucket_cap_bytes = 0;
  bool tf32 = false;  // fp32 GEMMs on TF32 tensor cores (sm_80+)
  // GEMM operand precision (autocast.h). fp16 scales the loss dynamically (loss_scaler.h).
  GemmPrecision precision = GemmPrecision::kFp32;
  LossScalerOptions loss_scaler;
  // train.gradient_checkpointing: backward recomputes each encoder layer (bert_cuda_model.h),
  // a smaller activation arena for the same results.
  bool gradient_checkpointing = false;
  // Test hook: FinishStep call number `poison_grad_at_call` (1-based, counted by this state)
  // writes +inf into the first gradient before the finite check, as an fp16 overflow would.
  // 0: never. The trainer sets it from RINGMASTER_TEST_POISON_GRAD_STEP.
  int64_t poison_grad_at_call = 0;
};

// What FinishStep did.
struct StepOutcome {
  double loss = 0;        // Σ over ranks of FinishStep's local_loss
  double flag_sum = 0;    // Σ over ranks of FinishStep's flag
  double grad_norm = 0;   // before clipping, unscaled; NaN/inf when not finite
  bool skipped = false;   // fp16: a non-finite gradient; nothing applied, the scale lowered
  double loss_scale = 0;  // the scale this step's loss was multiplied by (0: no scaling)
};

class CudaTrainerState {
 public:
  // Uploads `params` (layout.total floats, the same on every rank); moments start at zero, step
  // at 0. `comms`: the ranks' communicators (collectives on device buffers); empty for one.
  static absl::StatusOr<std::unique_ptr<CudaTrainerState>> Create(
      const BertConfig& config, const ParamLayout& layout, const std::vector<float>& params,
      const CudaTrainerOptions& options, const DataParallelComms& comms = {});
  ~CudaTrainerState();
  CudaTrainerState(const CudaTrainerState&) = delete;
  CudaTrainerState& operator=(const CudaTrainerState&) = delete;

  absl::Status BeginStep();
  // Collective. Forward + backward of one micro-batch with dropout; gradients += loss_weight ·
  // ∂loss/∂θ; in the step's last micro-batch (`last_of_step`) they are reduced over the ranks.
  // Returns the micro-batch's mean loss.
  absl::StatusOr<float> ForwardBackward(const BertInputs& in, float loss_weight,
                                        uint64_t dropout_seed, bool last_of_step = true);
  // Collective. The same collectives for a rank without samples in this micro-batch.
  absl::Status EmptyMicroBatch(bool last_of_step);
  // Collective. Completes the reductions, sums `local_loss` and `flag` over the ranks, clips to
  // `max_grad_norm` (<= 0: no clipping) and applies AdamW with `lr`. Returns the norm before
  // clipping. fp32/bf16: a non-finite norm is returned and nothing applied (the caller
  // decides the step diverged). fp16: the gradients were computed from the loss times the
  // scale; a non-finite norm skips the step (weights and moments untouched, counted, scale
  // halved), a finite one is unscaled before clipping; the scaler's "diverged" verdict (scale
  // below its minimum) is a FailedPrecondition naming the step.
  absl::StatusOr<StepOutcome> FinishStep(double lr, double max_grad_norm, double local_loss = 0,
                                         float flag = 0);
  // Collective. Forward without dropout: the mean loss (0 without labels); Logits() then holds
  // (B, C).
  absl::StatusOr<float> EvalForward(const BertInputs& in);
  // Collective. The same collectives for a rank without rows in this evaluation pass.
  absl::Status EmptyEvalForward();
  absl::StatusOr<std::vector<float>> Logits() const { return model_->Logits(); }

  // Collective (sharded parameters). The full parameters, on the host (export, tests).
  absl::StatusOr<std::vector<float>> DownloadParams() const;
  // A world of one: the whole state on the host (tests), and its restore.
  absl::Status DownloadOptimizer(std::vector<float>* exp_avg, std::vector<float>* exp_avg_sq) const;
  // Takes this rank's part of a checkpoint (CudaDataParallel::LoadRanges, compacted): the whole
  // layout in a world of one. Collective for shard_grad_op.
  absl::Status Upload(const std::vector<float>& params, const std::vector<float>& exp_avg,
                      const std::vector<float>& exp_avg_sq, int64_t step);
  CudaDataParallel& data_parallel() { return *dp_; }
  const CudaDataParallel& data_parallel() const { return *dp_; }
  int64_t step() const { return step_; }  // optimizer steps applied (skipped ones not)
  // fp16's scaler, null otherwise (checkpoints keep its state).
  DynamicLossScaler* loss_scaler() { return scaler_.get(); }
  const CudaBertModel& model() const { return *model_; }

  cudaStream_t stream() const { return stream_; }
  // Device bytes held: state buffers + GEMM workspace + activation arena (after a forward).
  size_t device_bytes() const;
  // Memory (now, peak, arena) and the GPU time of the steps (CUDA events around BeginStep ..
  // FinishStep). A step's time is read once its events completed without waiting for them, so
  // right after FinishStep it can still be the previous step's.
  DeviceFigures figures() const;

 private:
  CudaTrainerState() = default;

  CudaTrainerOptions options_;
  size_t n_ = 0;
  int64_t step_ = 0;
  int64_t finish_calls_ = 0;
  std::unique_ptr<DynamicLossScaler> scaler_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaDataParallel> dp_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<CudaBertModel> model_;
  // Step timing: begin/end recorded on stream_; read when the end event has completed.
  // FinishStep's work: norm, loss scaling, clipping, AdamW.
  absl::StatusOr<StepOutcome> ApplyStep(double lr, double max_grad_norm, double local_loss,
                                        float flag);
  absl::Status EndStepTiming();  // records step_end_ after the step's last kernel
  void ReadStepTime(bool wait) const;
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;
  bool step_open_ = false;             // BeginStep recorded step_begin_, FinishStep not yet
  mutable bool step_pending_ = false;  // step_end_ recorded, its time not read yet
  mutable double last_step_seconds_ = 0, busy_seconds_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace ringmaster::trainer::cuda
