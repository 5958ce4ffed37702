#include "trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace ringmaster::trainer {

double LrSchedule::LrAt(int64_t step) const {
  if (step < warmup_steps) {
    return base_lr * static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, warmup_steps));
  }
  if (kind == jobspec::LrScheduleKind::kConstant) return base_lr;
  const double left = static_cast<double>(total_steps - step);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  return base_lr * std::max(0.0, left / span);
}

int64_t WarmupSteps(int64_t explicit_steps, double ratio, int64_t total_steps) {
  if (explicit_steps > 0) return explicit_steps;
  return static_cast<int64_t>(std::ceil(ratio * static_cast<double>(total_steps)));
}

}  // namespace ringmaster::trainer
