// JobWatch: one job's published status and its change signal.
#include "coordinator/cluster/job_watch.h"

#include <utility>

namespace ringmaster::coordinator {

void JobWatch::Publish(const v1::JobStatus& status) {
  std::string bytes = status.SerializeAsString();
  absl::MutexLock lock(&mu_);
  if (version_ > 0 && bytes == bytes_) return;
  bytes_ = std::move(bytes);
  status_ = status;
  ++version_;
}

void JobWatch::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

JobWatch::Snapshot JobWatch::Current() {
  absl::MutexLock lock(&mu_);
  return {version_, status_, closed_};
}

JobWatch::Snapshot JobWatch::WaitForChange(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != seen || closed_; };
  if (mu_.AwaitWithTimeout(absl::Condition(&changed), timeout)) ++wakeups_;
  return {version_, status_, closed_};
}

uint64_t JobWatch::changes() {
  absl::MutexLock lock(&mu_);
  return version_;
}

uint64_t JobWatch::wakeups() {
  absl::MutexLock lock(&mu_);
  return wakeups_;
}

}  // namespace ringmaster::coordinator
