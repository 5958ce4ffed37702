// Rank 0's training progress as the trainer records it: the last line of
// `<output.dir>/metrics.jsonl` ({"step","epoch","loss","lr","grad_norm"}) and the total step
// count from rank 0's log ("... total N steps", logged once at the start). Only what changed since
// this generation started counts: a metrics file older than the generation is the previous
// run's.
//
// Samples/s is derived: steps done since the first observation of this generation times the
// global batch size, over the time between the observations (the agent's clock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace ringmaster::agent {

struct MetricsLine {
  int64_t step = 0;
  double loss = 0;
};

// Parses the last complete JSON line of `tail` (a file's end). Nullopt without one.
std::optional<MetricsLine> ParseLastMetricsLine(std::string_view tail);

// Finds "total N steps" in a trainer log excerpt; nullopt without it.
std::optional<int64_t> ParseTotalSteps(std::string_view log_text);

struct JobProgress {
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0;
  double samples_per_second = 0;  // whole job
};

class ProgressReader {
 public:
  // `max_steps`: the spec's train.max_steps (> 0 wins over the log's total).
  ProgressReader(std::string metrics_path, std::string rank0_log_path, int64_t global_batch_size,
                 int64_t max_steps, absl::Time generation_start);

  // Reads the files again; `now` is the agent's clock.
  JobProgress Update(absl::Time now);

 private:
  std::string metrics_path_;
  std::string rank0_log_path_;
  int64_t global_batch_size_;
  absl::Time generation_start_;
  JobProgress last_;
  std::optional<std::pair<int64_t, absl::Time>> first_seen_;  // (step, when)
};

}  // namespace ringmaster::agent
