// RINGMASTER_SLOWDOWN=F (F >= 1): this process computes F times slower than it can, by sleeping
// (F - 1) x the measured time of each unit of compute (a micro-batch's forward and backward, a
// throughput probe iteration). It stands in for a slower device, so mixed-generation planning and
// fault tests can run on one CPU machine with "deliberately slowed ranks". Unset or 1: no effect.
// The factor is read with the trainer's other variables (TrainerEnv, trainer/parallel/dist_env.h).
#pragma once

#include <chrono>

#include "absl/status/statusor.h"

namespace ringmaster::trainer {

class Slowdown {
 public:
  explicit Slowdown(double factor = 1.0) : factor_(factor) {}

  double factor() const { return factor_; }
  // Marks the start of a unit of compute.
  void Begin() { start_ = std::chrono::steady_clock::now(); }
  // Sleeps (factor - 1) x the time since Begin().
  void End() const;

 private:
  double factor_ = 1.0;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace ringmaster::trainer
