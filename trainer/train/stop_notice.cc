#include "trainer/train/stop_notice.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

StopNotice::StopNotice(const std::atomic<bool>* stop, const std::atomic<int64_t>* stop_step,
                       Say say)
    : stop_(stop), stop_step_(stop_step), say_(std::move(say)) {
  if (stop_ != nullptr) thread_ = std::thread([this] { Watch(); });
}

StopNotice::~StopNotice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string StopNotice::Text(int64_t step) {
  return absl::StrCat("stop requested (SIGTERM or SIGINT): finishing step ", step,
                      ", then saving a checkpoint");
}

void StopNotice::Flush() {
  if (stop_ == nullptr || !stop_->load()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (said_) return;
  said_ = true;
  say_(Text(stop_step_->load()));
}

void StopNotice::Watch() {
  // A signal handler cannot wake a condition variable; a poll every 50 ms is quick enough for a
  // person and costs nothing beside a training step.
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    if (stop_->load()) {
      if (!said_) say_(Text(stop_step_->load()));
      said_ = true;
      return;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

}  // namespace ringmaster::trainer
