#include "trainer/cuda/engine/cuda_engine.h"

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "jobspec/precision_policy.h"
#include "trainer/train/sharded_checkpoint.h"
#include "trainer/train/train_loop.h"

namespace ringmaster::trainer::cuda {
namespace {

// CheckpointMeta::extra keys of the fp16 engine: the loss scaler's state and the optimizer's
// own step count (skipped steps do not advance AdamW's bias correction; meta.step counts the
// loop's steps). The CPU engine ignores both.
constexpr char kScalerKey[] = "cuda_fp16_loss_scaler";
constexpr char kOptimizerStepKey[] = "cuda_optimizer_step";

BertInputs InputsOf(const Batch& b) {
  return {b.batch_size,
          b.seq_len,
          b.input_ids.data(),
          b.token_type_ids.data(),
          b.attention_mask.data(),
          b.labels.empty() ? nullptr : b.labels.data()};
}

}  // namespace

std::string DeviceDescription() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return "an unknown CUDA device";
  }
  return absl::StrFormat("CUDA device %d, %s, compute capability %d.%d", device, prop.name,
                         prop.major, prop.minor);
}

absl::Status CheckPrecisionOnDevice(GemmPrecision precision) {
  if (precision == GemmPrecision::kFp32) return absl::OkStatus();
  // Tensor-core GEMMs with these operand types: the planner's rule (jobspec/precision_policy.h).
  const int need = jobspec::MinComputeCapabilityFor(
      precision == GemmPrecision::kBf16 ? jobspec::Precision::kBf16 : jobspec::Precision::kFp16);
  const int need_major = need / 10;
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return absl::UnavailableError("no usable CUDA device: cudaGetDeviceProperties failed");
  }
  if (prop.major * 10 + prop.minor < need) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "train.precision: %s (the job's setting or this rank's plan) needs a GPU of compute "
        "capability >= %d.0, but CUDA device %d "
        "(%s) has %d.%d; use precision %s",
        GemmPrecisionName(precision), need_major, device, prop.name, prop.major, prop.minor,
        prop.major >= 7 && precision == GemmPrecision::kBf16 ? "fp16 or fp32" : "fp32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaEngine>> CudaEngine::Create(const CudaTrainerOptions& options,
                                                               const BertConfig& config,
                                                               const ParamLayout& layout,
                                                               const float* initial,
                                                               const DataParallelComms& comms) {
  RM_RETURN_IF_ERROR(CheckPrecisionOnDevice(options.precision));
  std::unique_ptr<CudaEngine> e(new CudaEngine());
  e->layout_ = layout;
  if (comms.world != nullptr) {
    e->rank_ = comms.world->rank();
    e->world_size_ = comms.world->size();
  }
  RM_ASSIGN_OR_RETURN(
      e->state_,
      CudaTrainerState::Create(config, layout, std::vector<float>(initial, initial + layout.total),
                               options, comms));
  return e;
}

void CudaEngine::BeginStep() { Keep(state_->BeginStep()); }

absl::StatusOr<float> CudaEngine::TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) {
  RM_RETURN_IF_ERROR(status_);
  return state_->ForwardBackward(InputsOf(batch), args.loss_weight, args.dropout_seed,
                                 args.last_of_step);
}

void CudaEngine::EmptyMicroBatch(bool last_of_step) { Keep(state_->EmptyMicroBatch(last_of_step)); }

absl::StatusOr<StepTotals> CudaEngine::FinishStep(double local_loss, double lr,
                                                  double max_grad_norm, float flag) {
  RM_RETURN_IF_ERROR(status_);
  absl::StatusOr<StepOutcome> r = state_->FinishStep(lr, max_grad_norm, local_loss, flag);
  if (!r.ok()) {
    // The loss scaler's verdict: the scale fell below its minimum. Restarting repeats it.
    if (absl::IsFailedPrecondition(r.status())) {
      return Diverged(absl::StrCat("fp16 loss scaling: ", r.status().message()));
    }
    return r.status();
  }
  StepTotals t{r->loss, r->grad_norm, r->flag_sum};
  t.skipped = r->skipped;
  t.loss_scale = r->loss_scale;
  return t;
}

absl::StatusOr<ForwardOutput> CudaEngine::EvalForward(const Batch& batch) {
  RM_ASSIGN_OR_RETURN(const float loss, state_->EvalForward(InputsOf(batch)));
  RM_ASSIGN_OR_RETURN(logits_, state_->Logits());
  return ForwardOutput{loss, logits_};
}

void CudaEngine::EmptyEvalForward() { Keep(state_->EmptyEvalForward()); }

absl::Status CudaEngine::status() const {
  RM_RETURN_IF_ERROR(status_);
  return state_->data_parallel().status();
}

absl::Status CudaEngine::AllReduceSum(std::vector<float>* values) {
  return state_->data_parallel().AllReduceWorld(values);
}

absl::Status CudaEngine::Barrier() { return state_->data_parallel().Barrier(); }

absl::StatusOr<uint64_t> CudaEngine::SaveCheckpoint(const std::string& output_dir,
                                                    const CheckpointMeta& position, int keep) {
  CudaDataParallel& dp = state_->data_parallel();
  CheckpointMeta meta = position;
  meta.fingerprint = LayoutFingerprint(layout_);
  meta.total = layout_.total;
  meta.sharding = std::string(ShardingName(dp.sharding()));
  if (DynamicLossScaler* scaler = state_->loss_scaler(); scaler != nullptr) {
    meta.extra[kScalerKey] = scaler->ToJson();
    meta.extra[kOptimizerStepKey] = state_->step();
  }
  std::vector<float> p, m, v;
  RM_RETURN_IF_ERROR(dp.CopyForSave(&p, &m, &v));
  RM_RETURN_IF_ERROR(SaveShardedCheckpoint(output_dir, rank_, world_size_, meta, dp.SaveRanges(),
                                           p.data(), m.data(), v.data(), keep,
                                           [&] { return dp.Barrier(); }));
  return static_cast<uint64_t>((p.size() + m.size() + v.size()) * sizeof(float));
}

absl::StatusOr<LoadedShard> CudaEngine::ReadCheckpoint(const std::string& dir) const {
  return LoadShardedCheckpoint(dir, layout_.total, LayoutFingerprint(layout_),
                               state_->data_parallel().LoadRanges());
}

absl::Status CudaEngine::LoadCheckpoint(const LoadedShard& shard) {
  int64_t optimizer_step = shard.meta.step;
  const nlohmann::json& extra = shard.meta.extra;
  DynamicLossScaler* scaler = state_->loss_scaler();
  if (scaler != nullptr && extra.is_object() && extra.contains(kScalerKey)) {
    RM_RETURN_IF_ERROR(scaler->Restore(extra[kScalerKey]));
    if (extra.contains(kOptimizerStepKey) && extra[kOptimizerStepKey].is_number_integer()) {
      optimizer_step = extra[kOptimizerStepKey].get<int64_t>();
    }
  }  // else (an fp32/bf16 or CPU checkpoint): the scaler starts afresh
  return state_->Upload(shard.params, shard.exp_avg, shard.exp_avg_sq, optimizer_step);
}

absl::Status CudaEngine::GatherFullParams(std::vector<float>* out) {
  RM_ASSIGN_OR_RETURN(*out, state_->DownloadParams());
  return absl::OkStatus();
}

EngineFigures CudaEngine::figures() const {
  const CudaDataParallel& dp = state_->data_parallel();
  EngineFigures f;
  f.persistent_bytes = dp.persistent_bytes();
  f.peak_transient_bytes = state_->device_bytes() - f.persistent_bytes;
  f.comm = dp.comm_totals();
  f.device = state_->figures();
  return f;
}

}  // namespace ringmaster::trainer::cuda
