// The trainer's throughput on this machine, measured once by the agent at registration
// (`ringmaster-trainer probe`): training steps (forward, backward, clipping, AdamW) of a fixed
// reference BERT on a fixed random batch, the median step after a warm-up. The figure only has to
// rank devices against each other: the coordinator turns the nodes' figures into micro-batch
// shares. RINGMASTER_SLOWDOWN applies, as in training.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::trainer {

struct ProbeOptions {
  double min_seconds = 1.5;  // time at least this long after the warm-up...
  int min_steps = 3;         // ...and at least this many steps
  double slowdown = 1.0;     // RINGMASTER_SLOWDOWN (TrainerEnv): a slower device stood in for
};

struct ProbeResult {
  double samples_per_second = 0;
  int steps = 0;
  double seconds = 0;
  std::string device;  // "cpu"
  std::string model;   // the reference configuration, e.g. "bert-h128-l2-s64-b8"
  int threads = 1;

  std::string ToJson() const;  // one line
};

absl::StatusOr<ProbeResult> ProbeThroughput(const ProbeOptions& options);

}  // namespace ringmaster::trainer
