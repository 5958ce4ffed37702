// What the training loop (TrainLoop) asks of the part that holds the model and computes: the
// forward and backward of one micro-batch, finishing an optimizer step, forward-only
// evaluation, checkpointing its state and gathering the weights for export. Everything
// model-, precision- and device-specific lives behind this interface; the loop owns the data,
// the plan, the schedule, metrics, checkpoints' position fields, resume and export.
//
// Collectives. An engine may communicate with the other ranks inside any call marked
// "collective" below; every rank must then make the same sequence of those calls (a rank with
// no samples in a micro-batch or evaluation pass calls the Empty* variant, which issues the
// same collectives). Calls marked "per-rank" never communicate.
//
// Errors. A collective that fails inside a pass (model code cannot stop mid-way) is sticky: the
// pass completes without it and status() / FinishStep report it. A rank that gets an error from
// any call abandons the run; its peers see it as a lost rank.
//
// Buffers. Batches are the caller's and are only read during the call. Logits returned by
// EvalForward are the engine's and valid until its next call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/trainer_metrics.h"
#include "trainer/data/batcher.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {

struct MicroBatchArgs {
  bool last_of_step = true;   // the step's last micro-batch: gradient reduction may start
  float loss_weight = 1.0f;   // this micro-batch's samples / the step's global samples
  uint64_t dropout_seed = 0;  // dropout masks derive from it (the loop makes it resumable)
};

struct StepTotals {
  double loss = 0;       // global mean loss of the step (sum over ranks of their weighted parts)
  double grad_norm = 0;  // global L2 norm of the gradients before clipping
  double flag_sum = 0;   // sum over ranks of FinishStep's `flag`
  // fp16 loss scaling (CUDA engine): the step's gradients overflowed, nothing was applied and
  // the scale was lowered; grad_norm is then not meaningful. The loop counts it as a step taken
  // (its batches are consumed, as torch's GradScaler does) without failing the job.
  bool skipped = false;
  double loss_scale = 0;  // the scale the step's loss was multiplied by; 0: none
};

struct ForwardOutput {
  float loss = 0;                  // mean loss over the batch
  absl::Span<const float> logits;  // (batch_size, num_labels), the engine's buffer
};

// What the engine holds and has sent, for metrics and the per-rank report.
struct EngineFigures {
  uint64_t persistent_bytes = 0;        // parameters, gradients, optimizer state, always held
  uint64_t peak_transient_bytes = 0;    // gathered weights, unit gradients, comm scratch: peak
  CommTotals comm;                      // bytes sent since the start
  std::optional<DeviceFigures> device;  // an engine on a GPU: its memory and GPU step time
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;

  // Parameters of the model (log lines).
  virtual int64_t num_params() const = 0;

  // --- One optimizer step: BeginStep, then for each of the step's micro-batches either
  // TrainMicroBatch or (this rank has no samples in it) EmptyMicroBatch, then FinishStep.
  virtual void BeginStep() = 0;  // per-rank: zeroes the gradients
  // Collective. Forward and backward of a non-empty batch; gradients accumulate weighted by
  // args.loss_weight. Returns the micro-batch's mean loss (unweighted).
  virtual absl::StatusOr<float> TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) = 0;
  // Collective. The same collectives as TrainMicroBatch with zero gradients.
  virtual void EmptyMicroBatch(bool last_of_step) = 0;
  // Collective. Completes the gradient reduction, clips to `max_grad_norm` (0: no clipping),
  // updates with learning rate `lr` and sums over ranks `local_loss` (this rank's
  // Σ loss·weight) and `flag` (e.g. 1 on a rank asked to stop). The totals come back even when
  // they are not finite (the loop decides what that means).
  virtual absl::StatusOr<StepTotals> FinishStep(double local_loss, double lr, double max_grad_norm,
                                                float flag) = 0;

  // --- Evaluation (no dropout, no gradients).
  // Collective. Forward of a non-empty batch.
  virtual absl::StatusOr<ForwardOutput> EvalForward(const Batch& batch) = 0;
  // Collective. The same collectives as EvalForward for a rank without rows in this pass.
  virtual void EmptyEvalForward() = 0;

  // Per-rank. The first failure of a collective issued inside a pass; OK otherwise.
  virtual absl::Status status() const = 0;

  // Collective. Sum over all ranks of a few values (evaluation sums, agreement flags).
  virtual absl::Status AllReduceSum(std::vector<float>* values) = 0;
  // Collective.
  virtual absl::Status Barrier() = 0;

  // --- Checkpoints (trainer/train/sharded_checkpoint.h). The loop owns the position fields of
  // CheckpointMeta (step, epoch, cursor, samples_seen, seed, world_size); the engine fills in
  // what describes its state (total, fingerprint, sharding, extra) and writes its shard.
  // Collective. Returns the bytes of state this rank wrote.
  virtual absl::StatusOr<uint64_t> SaveCheckpoint(const std::string& output_dir,
                                                  const CheckpointMeta& position, int keep) = 0;
  // Per-rank. The part of checkpoint directory `dir` this rank needs (any world size wrote it):
  // FailedPrecondition when it belongs to another model, DataLoss when damaged.
  virtual absl::StatusOr<LoadedShard> ReadCheckpoint(const std::string& dir) const = 0;
  // Per-rank. Takes over the state ReadCheckpoint returned (the optimizer resumes at
  // shard.meta.step).
  virtual absl::Status LoadCheckpoint(const LoadedShard& shard) = 0;

  // Collective. The full fp32 parameters in the flat layout (for export).
  virtual absl::Status GatherFullParams(std::vector<float>* out) = 0;

  // Per-rank.
  virtual EngineFigures figures() const = 0;
};

}  // namespace ringmaster::trainer
