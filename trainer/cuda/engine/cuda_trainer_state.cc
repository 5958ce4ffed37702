#include "trainer/cuda/engine/cuda_trainer_state.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {

absl::StatusOr<std::unique_ptr<CudaTrainerState>> CudaTrainerState::Create(
    const BertConfig& config, const ParamLayout& layout, const std::vector<float>& params,
    const CudaTrainerOptions& options, const DataParallelComms& comms) {
  if (params.size() != layout.total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaTrainerState: %d parameters given for a layout of %d", params.size(), layout.total));
  }
  std::unique_ptr<CudaTrainerState> s(new CudaTrainerState());
  s->options_ = options;
  s->n_ = layout.total;
  RM_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&s->stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&s->step_begin_));
  RM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&s->step_end_));
  RM_ASSIGN_OR_RETURN(s->dp_,
                      CudaDataParallel::Create(layout, options.sharding, comms, params, s->stream_,
                                               options.compression, options.bucket_cap_bytes));
  RM_ASSIGN_OR_RETURN(s->gemm_, Gemm::Create(options.tf32));
  RM_ASSIGN_OR_RETURN(s->model_,
                      CudaBertModel::Create(config, layout, s->gemm_.get(), s->stream_,
                                            options.precision, options.gradient_checkpointing));
  if (options.precision == GemmPrecision::kFp16) {
    RM_ASSIGN_OR_RETURN(DynamicLossScaler scaler, DynamicLossScaler::Create(options.loss_scaler));
    s->scaler_ = std::make_unique<DynamicLossScaler>(std::move(scaler));
  }
  return s;
}

CudaTrainerState::~CudaTrainerState() {
  model_.reset();
  gemm_.reset();
  dp_.reset();
  if (step_begin_ != nullptr) cudaEventDestroy(step_begin_);
  if (step_end_ != nullptr) cudaEventDestroy(step_end_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaTrainerState::BeginStep() {
  // The previous step's end event is re-recorded below: read its time first (its optimizer
  // kernels are the only work that can still be running).
  ReadStepTime(/*wait=*/true);
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_begin_, stream_));
  step_open_ = true;
  return dp_->BeginStep();
}

absl::StatusOr<float> CudaTrainerState::ForwardBackward(const BertInputs& in, float loss_weight,
                                                        uint64_t dropout_seed, bool last_of_step) {
  dp_->BeginMicroBatch(last_of_step, /*training=*/true);
  RM_ASSIGN_OR_RETURN(const float loss,
                      model_->Forward(dp_.get(), in, /*training=*/true, dropout_seed));
  // fp16: the backward pass starts from the scaled loss gradient, so every gradient is scaled.
  const double scale = scaler_ != nullptr ? scaler_->scale() : 1.0;
  dp_->BeginBackward();
  RM_RETURN_IF_ERROR(model_->Backward(dp_.get(), static_cast<float>(loss_weight * scale)));
  peak_bytes_ = std::max(peak_bytes_, device_bytes());
  RM_RETURN_IF_ERROR(dp_->status());
  return loss;
}

absl::Status CudaTrainerState::EmptyMicroBatch(bool last_of_step) {
  dp_->BeginMicroBatch(last_of_step, /*training=*/true);
  dp_->RunEmptyMicroBatch(model_->num_units());
  return dp_->status();
}

absl::StatusOr<StepOutcome> CudaTrainerState::FinishStep(double lr, double max_grad_norm,
                                                         double local_loss, float flag) {
  absl::StatusOr<StepOutcome> out = ApplyStep(lr, max_grad_norm, local_loss, flag);
  RM_RETURN_IF_ERROR(EndStepTiming());  // after the step's last kernel, applied or skipped
  return out;
}

absl::StatusOr<StepOutcome> CudaTrainerState::ApplyStep(double lr, double max_grad_norm,
                                                        double local_loss, float flag) {
  ++finish_calls_;
  float* grads = dp_->update_grads();
  const size_t count = dp_->update_size();
  if (options_.poison_grad_at_call == finish_calls_ && count > 0) {
    const float inf = std::numeric_limits<float>::infinity();
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(grads, &inf, sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  RM_ASSIGN_OR_RETURN(const ReducedStep sums, dp_->Reduce(local_loss, flag));
  // The sum of squares is in double: inf or NaN exactly when a gradient is.
  const double norm = std::sqrt(sums.grad_sq);
  StepOutcome out;
  out.loss = sums.loss;
  out.flag_sum = sums.flag_sum;
  out.grad_norm = norm;
  if (scaler_ != nullptr) {
    const double scale = scaler_->scale();
    out.loss_scale = scale;
    RM_ASSIGN_OR_RETURN(const ScaledStep what, scaler_->Update(std::isfinite(norm), step_ + 1));
    if (what == ScaledStep::kSkip) {
      out.skipped = true;
      return out;
    }
    RM_CUDA_RETURN_IF_ERROR(ScaleInPlace(grads, count, static_cast<float>(1.0 / scale), stream_));
    out.grad_norm = norm / scale;
  }
  if (!std::isfinite(out.grad_norm)) return out;  // nothing applied; the loop fails the step
  if (max_grad_norm > 0) {
    // As ClipGradNorm: the coefficient in double, applied in fp32.
    const double coef = max_grad_norm / (out.grad_norm + 1e-6);
    if (coef < 1.0) {
      RM_CUDA_RETURN_IF_ERROR(ScaleInPlace(grads, count, static_cast<float>(coef), stream_));
    }
  }
  ++step_;
  RM_RETURN_IF_ERROR(dp_->Update(step_, lr, options_.adam));
  model_->WeightsChanged();
  return out;
}

absl::Status CudaTrainerState::EndStepTiming() {
  if (!step_open_) return absl::OkStatus();
  RM_CUDA_RETURN_IF_ERROR(cudaEventRecord(step_end_, stream_));
  step_open_ = false;
  step_pending_ = true;
  return absl::OkStatus();
}

void CudaTrainerState::ReadStepTime(bool wait) const {
  if (!step_pending_) return;
  if (wait) {
    if (cudaEventSynchronize(step_end_) != cudaSuccess) return;
  } else if (const cudaError_t q = cudaEventQuery(step_end_); q != cudaSuccess) {
    // Still running: read next time. Not-ready is not an error; keep it out of the last error
    // that the next launch check reads.
    if (q == cudaErrorNotReady) (void)cudaGetLastError();
    return;
  }
  float ms = 0;
  if (cudaEventElapsedTime(&ms, step_begin_, step_end_) != cudaSuccess) return;
  step_pending_ = false;
  last_step_seconds_ = ms * 1e-3;
  busy_seconds_ += last_step_seconds_;
}

DeviceFigures CudaTrainerState::figures() const {
  ReadStepTime(/*wait=*/false);
  DeviceFigures f;
  f.allocated_bytes = device_bytes();
  f.peak_allocated_bytes = std::max(peak_bytes_, f.allocated_bytes);
  f.arena_bytes = model_->arena_bytes();
  f.step_seconds = last_step_seconds_;
  f.busy_seconds_total = busy_seconds_;
  f.comm_seconds = dp_->last_comm_seconds();
  f.comm_seconds_total = dp_->comm_seconds_total();
  f.exposed_comm_seconds = dp_->last_exposed_comm_seconds();
  f.exposed_comm_seconds_total = dp_->exposed_comm_seconds_total();
  return f;
}

absl::StatusOr<float> CudaTrainerState::EvalForward(const BertInputs& in) {
  dp_->BeginMicroBatch(/*last_of_step=*/true, /*training=*/false);
  RM_ASSIGN_OR_RETURN(const float loss, model_->Forward(dp_.get(), in, /*training=*/false, 0));
  RM_RETURN_IF_ERROR(dp_->Settle());
  return loss;
}

absl::Status CudaTrainerState::EmptyEvalForward() {
  dp_->BeginMicroBatch(/*last_of_step=*/true, /*training=*/false);
  dp_->RunEmptyForward(model_->num_units());
  return dp_->Settle();
}

absl::StatusOr<std::vector<float>> CudaTrainerState::DownloadParams() const {
  std::vector<float> out;
  RM_RETURN_IF_ERROR(dp_->GatherFullParams(&out));
  return out;
}

absl::Status CudaTrainerState::DownloadOptimizer(std::vector<float>* exp_avg,
                                                 std::vector<float>* exp_avg_sq) const {
  if (dp_->world_size() != 1) {
    return absl::FailedPreconditionError(
        "CudaTrainerState::DownloadOptimizer: the moments are sharded over the ranks");
  }
  std::vector<float> params;
  return dp_->CopyForSave(&params, exp_avg, exp_avg_sq);
}

absl::Status CudaTrainerState::Upload(const std::vector<float>& params,
                                      const std::vector<float>& exp_avg,
                                      const std::vector<float>& exp_avg_sq, int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CudaTrainerState::Upload: optimizer step %d", step));
  }
  RM_RETURN_IF_ERROR(dp_->LoadFrom(params, exp_avg, exp_avg_sq));
  step_ = step;
  dp_->set_optimizer_step(step);
  model_->WeightsChanged();
  return absl::OkStatus();
}

size_t CudaTrainerState::device_bytes() const {
  return dp_->persistent_bytes() + dp_->pooled_bytes() + model_->arena_bytes() +
         gemm_->workspace_bytes() + model_->autocast().device_bytes();
}

}  // namespace ringmaster::trainer::cuda
