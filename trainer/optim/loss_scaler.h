// Dynamic loss scaling for fp16 training (the policy of torch.cuda.amp.GradScaler, and of
// DeepSpeed's fp16 optimizer with hysteresis 1): the loss is multiplied by scale() before the
// backward pass so that small fp16 gradients do not flush to zero; a step whose gradients hold
// an inf or a NaN on any rank is skipped (the weights and the optimizer state stay as they are)
// and the scale is halved; after `growth_interval` finite steps in a row the scale doubles.
//
// Device-independent: the CUDA trainer's fp16 path (issue #3) reduces "all finite" over its
// ranks and asks Update() what to do. When the scale would fall below `min_scale`, training has
// diverged: Update() says so, naming the step, and the trainer fails the job as diverged (a
// restart would do the same again).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::trainer {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, as PyTorch
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows
  double min_scale = 1.0;          // below this: diverged
};

enum class ScaledStep {
  kApply,  // every gradient finite: unscale (multiply by 1 / the scale used) and step
  kSkip,   // an inf or NaN somewhere: drop this step's gradients; the scale was lowered
};

class DynamicLossScaler {
 public:
  // Options must be sane (init_scale >= min_scale > 0, growth_factor > 1, 0 < backoff < 1,
  // growth_interval >= 1); Create says which one is not.
  static absl::StatusOr<DynamicLossScaler> Create(LossScalerOptions options = {});

  // The scale to multiply this step's loss by.
  double scale() const { return scale_; }
  // Steps skipped so far (for the trainer's counter and its metric).
  int64_t skipped_steps() const { return skipped_; }
  // Finite steps since the last skip or growth.
  int64_t finite_in_a_row() const { return good_; }

  // After the backward pass of optimizer step `step`: `all_finite` is true when every
  // gradient of every rank is finite. FailedPrecondition naming the step and the scale when
  // the scale would fall below min_scale.
  absl::StatusOr<ScaledStep> Update(bool all_finite, int64_t step);

  // The state a checkpoint keeps, so that a resumed run scales exactly as an uninterrupted one.
  nlohmann::json ToJson() const;
  // InvalidArgument naming the field that is missing or out of range.
  absl::Status Restore(const nlohmann::json& j);

 private:
  explicit DynamicLossScaler(LossScalerOptions options)
      : options_(options), scale_(options.init_scale) {}

  LossScalerOptions options_;
  double scale_;
  int64_t good_ = 0;
  int64_t skipped_ = 0;
};

// True when none of the `n` values is an inf or a NaN (the CPU reference of the check the CUDA
// path folds into its gradient-norm kernel).
bool AllFinite(const float* values, size_t n);

}  // namespace ringmaster::trainer
