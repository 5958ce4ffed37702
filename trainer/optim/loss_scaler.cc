#include "trainer/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::trainer {

absl::StatusOr<DynamicLossScaler> DynamicLossScaler::Create(LossScalerOptions o) {
  auto bad = [](const char* field, double v, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler: ", field, " is ", v, ", expected ", want));
  };
  if (!(o.min_scale > 0) || !std::isfinite(o.min_scale))
    return bad("min_scale", o.min_scale, "> 0");
  if (!(o.init_scale >= o.min_scale) || !std::isfinite(o.init_scale)) {
    return bad("init_scale", o.init_scale, ">= min_scale");
  }
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor)) {
    return bad("growth_factor", o.growth_factor, "> 1");
  }
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1)) {
    return bad("backoff_factor", o.backoff_factor, "in (0, 1)");
  }
  if (o.growth_interval < 1) {
    return bad("growth_interval", static_cast<double>(o.growth_interval), ">= 1");
  }
  return DynamicLossScaler(o);
}

absl::StatusOr<ScaledStep> DynamicLossScaler::Update(bool all_finite, int64_t step) {
  if (all_finite) {
    if (++good_ >= options_.growth_interval) {
      // Growth stops where fp32 itself would overflow the scaled loss.
      scale_ = std::min(scale_ * options_.growth_factor, 1e30);
      good_ = 0;
    }
    return ScaledStep::kApply;
  }
  const double lowered = scale_ * options_.backoff_factor;
  if (lowered < options_.min_scale) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "gradients not finite at step %d with the loss scale already at %g (minimum %g): "
        "training diverged",
        step, scale_, options_.min_scale));
  }
  scale_ = lowered;
  good_ = 0;
  ++skipped_;
  return ScaledStep::kSkip;
}

nlohmann::json DynamicLossScaler::ToJson() const {
  return {{"scale", scale_}, {"finite_in_a_row", good_}, {"skipped_steps", skipped_}};
}

absl::Status DynamicLossScaler::Restore(const nlohmann::json& j) {
  auto field = [&](const char* name) -> const nlohmann::json* {
    if (!j.is_object() || !j.contains(name) || !j[name].is_number()) return nullptr;
    return &j[name];
  };
  const nlohmann::json* s = field("scale");
  const nlohmann::json* g = field("finite_in_a_row");
  const nlohmann::json* k = field("skipped_steps");
  if (s == nullptr || !(s->get<double>() >= options_.min_scale) ||
      !std::isfinite(s->get<double>())) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler state: 'scale' missing, not a number or below the minimum ",
                     options_.min_scale));
  }
  if (g == nullptr || !g->is_number_integer() || g->get<int64_t>() < 0 ||
      g->get<int64_t>() >= options_.growth_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler state: 'finite_in_a_row' missing or not an integer in [0, ",
                     options_.growth_interval, ")"));
  }
  if (k == nullptr || !k->is_number_integer() || k->get<int64_t>() < 0) {
    return absl::InvalidArgumentError(
        "loss scaler state: 'skipped_steps' missing or not a non-negative integer");
  }
  scale_ = s->get<double>();
  good_ = g->get<int64_t>();
  skipped_ = k->get<int64_t>();
  return absl::OkStatus();
}

bool AllFinite(const float* values, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return false;
  }
  return true;
}

}  // namespace ringmaster::trainer
