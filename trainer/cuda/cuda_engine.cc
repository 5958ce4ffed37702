#include "trainer/cuda/cuda_engine.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer::cuda {
namespace {

BertInputs InputsOf(const Batch& b) {
  return {b.batch_size,
          b.seq_len,
          b.input_ids.data(),
          b.token_type_ids.data(),
          b.attention_mask.data(),
          b.labels.empty() ? nullptr : b.labels.data()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaEngine>> CudaEngine::Create(const CudaTrainerOptions& options,
                                                               const BertConfig& config,
                                                               const ParamLayout& layout,
                                                               const float* initial,
                                                               int world_size) {
  if (world_size != 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "train.device: cuda runs one rank for now; this job has a world of %d ranks (the "
        "multi-GPU engine with NCCL is not built yet: use device cpu for several ranks)",
        world_size));
  }
  std::unique_ptr<CudaEngine> e(new CudaEngine());
  e->layout_ = layout;
  RM_ASSIGN_OR_RETURN(
      e->state_, CudaTrainerState::Create(
                     config, layout, std::vector<float>(initial, initial + layout.total), options));
  return e;
}

void CudaEngine::BeginStep() {
  if (absl::Status s = state_->BeginStep(); !s.ok() && status_.ok()) status_ = s;
}

absl::StatusOr<float> CudaEngine::TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) {
  RM_RETURN_IF_ERROR(status_);
  return state_->ForwardBackward(InputsOf(batch), args.loss_weight, args.dropout_seed);
}

absl::StatusOr<StepTotals> CudaEngine::FinishStep(double local_loss, double lr,
                                                  double max_grad_norm, float flag) {
  RM_RETURN_IF_ERROR(status_);
  RM_ASSIGN_OR_RETURN(const double norm, state_->FinishStep(lr, max_grad_norm));
  return StepTotals{local_loss, norm, flag};
}

absl::StatusOr<ForwardOutput> CudaEngine::EvalForward(const Batch& batch) {
  RM_ASSIGN_OR_RETURN(const float loss, state_->EvalForward(InputsOf(batch)));
  RM_ASSIGN_OR_RETURN(logits_, state_->Logits());
  return ForwardOutput{loss, logits_};
}

ShardRanges CudaEngine::Whole() const {
  ShardRanges r;
  r.ranges.push_back({0, layout_.total});
  return r;
}

absl::StatusOr<uint64_t> CudaEngine::SaveCheckpoint(const std::string& output_dir,
                                                    const CheckpointMeta& position, int keep) {
  CheckpointMeta meta = position;
  meta.fingerprint = LayoutFingerprint(layout_);
  meta.total = layout_.total;
  meta.sharding = "no_shard";
  RM_ASSIGN_OR_RETURN(const std::vector<float> p, state_->DownloadParams());
  std::vector<float> m, v;
  RM_RETURN_IF_ERROR(state_->DownloadOptimizer(&m, &v));
  RM_RETURN_IF_ERROR(SaveShardedCheckpoint(output_dir, /*rank=*/0, /*world_size=*/1, meta, Whole(),
                                           p.data(), m.data(), v.data(), keep,
                                           [] { return absl::OkStatus(); }));
  return static_cast<uint64_t>(3 * layout_.total * sizeof(float));
}

absl::StatusOr<LoadedShard> CudaEngine::ReadCheckpoint(const std::string& dir) const {
  return LoadShardedCheckpoint(dir, layout_.total, LayoutFingerprint(layout_), Whole());
}

absl::Status CudaEngine::LoadCheckpoint(const LoadedShard& shard) {
  return state_->Upload(shard.params, shard.exp_avg, shard.exp_avg_sq, shard.meta.step);
}

absl::Status CudaEngine::GatherFullParams(std::vector<float>* out) {
  RM_ASSIGN_OR_RETURN(*out, state_->DownloadParams());
  return absl::OkStatus();
}

EngineFigures CudaEngine::figures() const {
  EngineFigures f;
  f.persistent_bytes = 3 * layout_.total * sizeof(float) + layout_.total;  // + decay mask
  f.peak_transient_bytes = state_->device_bytes() - f.persistent_bytes;
  f.device = state_->figures();
  return f;
}

}  // namespace ringmaster::trainer::cuda
