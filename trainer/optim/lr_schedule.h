// Learning-rate schedules as Hugging Face's get_linear_schedule_with_warmup,
// get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup (num_cycles 0.5: one half
// cosine from lr down to 0) and get_polynomial_decay_schedule_with_warmup, formula for formula
// (lr_schedule_oracle_test checks every step against transformers). The CPU and CUDA engines
// both take their LR from LrAt through the loop (train_loop.cc), so one definition serves both.
#pragma once

#include <cstdint>
#include <string>

#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

struct LrSchedule {
  jobspec::LrScheduleKind kind = jobspec::LrScheduleKind::kLinear;
  double base_lr = 2e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double lr_end = 1e-7;  // polynomial: the LR reached at total_steps
  double power = 1.0;    // polynomial: the exponent of the remaining fraction

  // Learning rate for optimizer step `step` (0-based: the first update uses LrAt(0), which is
  // 0 under warmup, exactly as HF's LambdaLR before its first scheduler.step()).
  double LrAt(int64_t step) const;
};

// HF TrainingArguments.get_warmup_steps: explicit steps win, else ceil(ratio · total).
int64_t WarmupSteps(int64_t explicit_steps, double ratio, int64_t total_steps);

}  // namespace ringmaster::trainer
