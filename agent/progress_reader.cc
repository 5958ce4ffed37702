#include "agent/progress_reader.h"

#include "absl/status/statusor.h"
#include "common/rank_status.h"

namespace ringmaster::agent {

ProgressReader::ProgressReader(std::string status_path, int64_t global_batch_size,
                               int64_t max_steps)
    : status_path_(std::move(status_path)), global_batch_size_(global_batch_size) {
  last_.total_steps = max_steps > 0 ? max_steps : 0;
}

JobProgress ProgressReader::Update(absl::Time now) {
  // NotFound while the trainer starts (or restarts); DataLoss for a file that is not a block.
  absl::StatusOr<trainer::RankFigures> f = trainer::ReadRankStatusFile(status_path_);
  if (!f.ok()) return last_;
  if (f->steps_planned > 0) last_.total_steps = f->steps_planned;
  if (f->last_step_unix <= 0) return last_;  // no step yet in this process
  last_.step = f->step;
  last_.loss = f->loss;
  if (!first_seen_) {
    first_seen_ = {f->step, now};
  } else if (now > first_seen_->second && f->step > first_seen_->first) {
    last_.samples_per_second =
        static_cast<double>((f->step - first_seen_->first) * global_batch_size_) /
        absl::ToDoubleSeconds(now - first_seen_->second);
  }
  return last_;
}

}  // namespace ringmaster::agent
