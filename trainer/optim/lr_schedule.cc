#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ringmaster::trainer {

double LrSchedule::LrAt(int64_t step) const {
  if (step < warmup_steps) {
    return base_lr * static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, warmup_steps));
  }
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  switch (kind) {
    case jobspec::LrScheduleKind::kConstant:
      return base_lr;
    case jobspec::LrScheduleKind::kLinear:
      return base_lr * std::max(0.0, static_cast<double>(total_steps - step) / span);
    case jobspec::LrScheduleKind::kCosine: {
      // HF: 0.5 * (1 + cos(pi * num_cycles * 2 * progress)) with num_cycles 0.5.
      constexpr double kNumCycles = 0.5;
      const double progress = static_cast<double>(step - warmup_steps) / span;
      return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * kNumCycles * 2.0 * progress)));
    }
    case jobspec::LrScheduleKind::kPolynomial: {
      // HF computes a multiplier of the initial LR: (range · remaining^power + lr_end) / lr,
      // and lr_end / lr past the end.
      if (step > total_steps) return base_lr * (lr_end / base_lr);
      const double range = base_lr - lr_end;
      const double remaining = 1.0 - static_cast<double>(step - warmup_steps) / span;
      return base_lr * ((range * std::pow(remaining, power) + lr_end) / base_lr);
    }
  }
  return base_lr;
}

int64_t WarmupSteps(int64_t explicit_steps, double ratio, int64_t total_steps) {
  if (explicit_steps > 0) return explicit_steps;
  return static_cast<int64_t>(std::ceil(ratio * static_cast<double>(total_steps)));
}

}  // namespace ringmaster::trainer
