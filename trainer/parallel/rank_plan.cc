#include "trainer/parallel/rank_plan.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

absl::Status ApplyRankPlan(const DistEnv& env, JobSpec* job) {
  if (env.precision.has_value()) {
    const Precision p = *env.precision;
    const bool half = p == Precision::kFp16 || p == Precision::kBf16;
    if (half && job->train.device == Device::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RINGMASTER_PRECISION=", std::string(SettingName(p)),
          " (the coordinator's plan for this rank) needs a CUDA device, but this rank runs on "
          "the CPU (train.device: cpu); the CPU trainer computes in fp32"));
    }
    // An explicit job precision is what the planner sent (or, for a CPU rank given fp32 for a
    // half-precision job, the job's own error, which the trainer reports as such).
    if (job->train.precision == Precision::kAuto) job->train.precision = p;
  }
  if (env.compression.has_value()) job->distributed.compression = *env.compression;
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
