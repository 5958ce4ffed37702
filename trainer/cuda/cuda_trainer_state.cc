#include "trainer/cuda/cuda_trainer_state.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

template <typename T>
absl::Status Alloc(T** p, size_t count) {
  RM_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(p), count * sizeof(T)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaTrainerState>> CudaTrainerState::Create(
    const BertConfig& config, const ParamLayout& layout, const std::vector<float>& params,
    const CudaTrainerOptions& options) {
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
  RM_RETURN_IF_ERROR(Alloc(&s->params_, s->n_));
  RM_RETURN_IF_ERROR(Alloc(&s->grads_, s->n_));
  RM_RETURN_IF_ERROR(Alloc(&s->exp_avg_, s->n_));
  RM_RETURN_IF_ERROR(Alloc(&s->exp_avg_sq_, s->n_));
  RM_RETURN_IF_ERROR(Alloc(&s->decay_mask_, s->n_));
  RM_RETURN_IF_ERROR(Alloc(&s->norm_scratch_, GradNormScratchDoubles(s->n_)));
  RM_RETURN_IF_ERROR(Alloc(&s->norm_, 1));
  std::vector<uint8_t> mask(s->n_, 0);
  for (const ParamSpec& spec : layout.specs) {
    std::fill_n(mask.begin() + spec.offset, spec.numel, spec.weight_decay ? 1 : 0);
  }
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpy(s->decay_mask_, mask.data(), s->n_, cudaMemcpyHostToDevice));
  const std::vector<float> zeros(s->n_, 0.0f);
  RM_RETURN_IF_ERROR(s->Upload(params, zeros, zeros, 0));
  RM_ASSIGN_OR_RETURN(s->gemm_, Gemm::Create(options.tf32));
  RM_ASSIGN_OR_RETURN(s->model_, CudaBertModel::Create(config, layout, s->gemm_.get(), s->stream_,
                                                       options.precision));
  if (options.precision == GemmPrecision::kFp16) {
    RM_ASSIGN_OR_RETURN(DynamicLossScaler scaler, DynamicLossScaler::Create(options.loss_scaler));
    s->scaler_ = std::make_unique<DynamicLossScaler>(std::move(scaler));
  }
  return s;
}

CudaTrainerState::~CudaTrainerState() {
  model_.reset();
  gemm_.reset();
  for (void* p :
       {static_cast<void*>(params_), static_cast<void*>(grads_), static_cast<void*>(exp_avg_),
        static_cast<void*>(exp_avg_sq_), static_cast<void*>(decay_mask_),
        static_cast<void*>(norm_scratch_), static_cast<void*>(norm_)}) {
    if (p != nullptr) cudaFree(p);
  }
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
  RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads_, 0, n_ * sizeof(float), stream_));
  return absl::OkStatus();
}

absl::StatusOr<float> CudaTrainerState::ForwardBackward(const BertInputs& in, float loss_weight,
                                                        uint64_t dropout_seed) {
  RM_ASSIGN_OR_RETURN(const float loss,
                      model_->Forward(params_, in, /*training=*/true, dropout_seed));
  // fp16: the backward pass starts from the scaled loss gradient, so every gradient is scaled.
  const double scale = scaler_ != nullptr ? scaler_->scale() : 1.0;
  RM_RETURN_IF_ERROR(model_->Backward(params_, grads_, static_cast<float>(loss_weight * scale)));
  peak_bytes_ = std::max(peak_bytes_, device_bytes());
  return loss;
}

absl::StatusOr<StepOutcome> CudaTrainerState::FinishStep(double lr, double max_grad_norm) {
  absl::StatusOr<StepOutcome> out = ApplyStep(lr, max_grad_norm);
  RM_RETURN_IF_ERROR(EndStepTiming());  // after the step's last kernel, applied or skipped
  return out;
}

absl::StatusOr<StepOutcome> CudaTrainerState::ApplyStep(double lr, double max_grad_norm) {
  ++finish_calls_;
  if (options_.poison_grad_at_call == finish_calls_) {
    const float inf = std::numeric_limits<float>::infinity();
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(grads_, &inf, sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  RM_CUDA_RETURN_IF_ERROR(GradNorm(grads_, n_, norm_scratch_, norm_, stream_));
  double norm = 0;
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&norm, norm_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  StepOutcome out;
  out.grad_norm = norm;
  if (scaler_ != nullptr) {
    // The norm is a sum of squares in double: inf or NaN exactly when a gradient is.
    const double scale = scaler_->scale();
    out.loss_scale = scale;
    RM_ASSIGN_OR_RETURN(const ScaledStep what, scaler_->Update(std::isfinite(norm), step_ + 1));
    if (what == ScaledStep::kSkip) {
      out.skipped = true;
      return out;
    }
    RM_CUDA_RETURN_IF_ERROR(ScaleInPlace(grads_, n_, static_cast<float>(1.0 / scale), stream_));
    out.grad_norm = norm / scale;
  }
  if (!std::isfinite(out.grad_norm)) return out;  // nothing applied; the loop fails the step
  RM_CUDA_RETURN_IF_ERROR(ClipGradNorm(grads_, n_, max_grad_norm, norm_scratch_, norm_, stream_));
  ++step_;
  RM_CUDA_RETURN_IF_ERROR(AdamWStep(params_, grads_, exp_avg_, exp_avg_sq_, decay_mask_, n_, step_,
                                    lr, options_.adam.beta1, options_.adam.beta2, options_.adam.eps,
                                    options_.adam.weight_decay, stream_));
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
  return f;
}

absl::StatusOr<float> CudaTrainerState::EvalForward(const BertInputs& in) {
  return model_->Forward(params_, in, /*training=*/false, 0);
}

absl::StatusOr<std::vector<float>> CudaTrainerState::DownloadParams() const {
  std::vector<float> out(n_);
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), params_, n_ * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return out;
}

absl::Status CudaTrainerState::DownloadOptimizer(std::vector<float>* exp_avg,
                                                 std::vector<float>* exp_avg_sq) const {
  exp_avg->resize(n_);
  exp_avg_sq->resize(n_);
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(exp_avg->data(), exp_avg_, n_ * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(exp_avg_sq->data(), exp_avg_sq_, n_ * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaTrainerState::Upload(const std::vector<float>& params,
                                      const std::vector<float>& exp_avg,
                                      const std::vector<float>& exp_avg_sq, int64_t step) {
  if (params.size() != n_ || exp_avg.size() != n_ || exp_avg_sq.size() != n_ || step < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CudaTrainerState::Upload: sizes %d/%d/%d (step %d) for a layout of %d",
                        params.size(), exp_avg.size(), exp_avg_sq.size(), step, n_));
  }
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(params_, params.data(), n_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(exp_avg_, exp_avg.data(), n_ * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(exp_avg_sq_, exp_avg_sq.data(), n_ * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  step_ = step;
  if (model_ != nullptr) model_->WeightsChanged();  // null while Create uploads the first values
  return absl::OkStatus();
}

size_t CudaTrainerState::device_bytes() const {
  return n_ * (4 * sizeof(float) + 1) + GradNormScratchDoubles(n_) * sizeof(double) +
         model_->arena_bytes() + gemm_->workspace_bytes() + model_->autocast().device_bytes();
}

}  // namespace ringmaster::trainer::cuda
