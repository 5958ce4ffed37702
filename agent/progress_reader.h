// A rank's training progress as its trainer records it in its rank status block
// (RINGMASTER_STATUS_FILE, common/rank_status.h): the global step, the steps planned
// and the last step's loss. The block is the agent's one progress channel: it is not parsed
// from logs or metrics files, and the agent removes it before each launch, so what it holds is
// always this process's.
//
// Samples/s is derived: steps done since the first observation times the global batch size, over
// the time between the observations (the agent's clock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/time/time.h"

namespace ringmaster::agent {

struct JobProgress {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;
  double samples_per_second = 0;  // whole job
};

class ProgressReader {
 public:
  // `status_path`: the rank's status block. `max_steps`: the spec's train.max_steps, reported as
  // the total until the trainer has written its plan (0: unknown until then).
  ProgressReader(std::string status_path, int64_t global_batch_size, int64_t max_steps);

  // Reads the block again; `now` is the agent's clock. Until a (restarted) trainer has written
  // a step, the figures last read stay.
  JobProgress Update(absl::Time now);

 private:
  std::string status_path_;
  int64_t global_batch_size_;
  JobProgress last_;
  std::optional<std::pair<int64_t, absl::Time>> first_seen_;  // (step, when)
};

}  // namespace ringmaster::agent
