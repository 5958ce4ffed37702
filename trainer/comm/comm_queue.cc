#include "trainer/comm/comm_queue.h"

#include <utility>

namespace ringmaster::trainer {

absl::Status QueuedWork::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  return status_;
}

bool QueuedWork::IsDone() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

CommQueue::CommQueue() : thread_([this] { Loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> CommQueue::Submit(std::function<absl::Status()> op) {
  auto work = std::make_shared<QueuedWork>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(op), work);
    last_ = work;
  }
  cv_.notify_all();
  return work;
}

absl::Status CommQueue::Drain() {
  std::shared_ptr<Work> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = last_;
  }
  if (last != nullptr) last->Wait().IgnoreError();  // failure_ below says it all
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void CommQueue::Loop() {
  for (;;) {
    std::function<absl::Status()> op;
    std::shared_ptr<QueuedWork> work;
    absl::Status failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      op = std::move(queue_.front().first);
      work = std::move(queue_.front().second);
      queue_.pop_front();
      failed = failure_;
    }
    // After a failure the world is broken: later operations report it instead of running.
    absl::Status s = failed.ok() ? op() : failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok() && failure_.ok()) failure_ = s;
    }
    {
      std::lock_guard<std::mutex> lock(work->mu_);
      work->done_ = true;
      work->status_ = s;
    }
    work->cv_.notify_all();
  }
}

}  // namespace ringmaster::trainer
