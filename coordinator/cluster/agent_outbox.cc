// AgentOutbox: a per-node command queue with one consuming stream at a time.
#include "coordinator/cluster/agent_outbox.h"

#include <utility>

namespace ringmaster::coordinator {

AgentOutbox::AgentOutbox(std::shared_ptr<std::atomic<uint64_t>> command_ids)
    : command_ids_(std::move(command_ids)) {}

uint64_t AgentOutbox::Send(v1::CoordinatorMessage message) {
  const uint64_t id = command_ids_->fetch_add(1) + 1;
  message.set_command_id(id);
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(message));
  return id;
}

uint64_t AgentOutbox::Attach() {
  absl::MutexLock lock(&mu_);
  attached_ = true;
  return ++epoch_;
}

bool AgentOutbox::attached() {
  absl::MutexLock lock(&mu_);
  return attached_;
}

void AgentOutbox::Detach(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch == epoch_) attached_ = false;
}

std::optional<v1::CoordinatorMessage> AgentOutbox::WaitPop(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || epoch != epoch_ || !attached_;
  };
  mu_.Await(absl::Condition(&ready));
  if (epoch != epoch_ || !attached_) return std::nullopt;
  v1::CoordinatorMessage m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

void AgentOutbox::PushFront(v1::CoordinatorMessage message) {
  absl::MutexLock lock(&mu_);
  queue_.push_front(std::move(message));
}

std::optional<v1::CoordinatorMessage> AgentOutbox::TryPop() {
  absl::MutexLock lock(&mu_);
  if (queue_.empty()) return std::nullopt;
  v1::CoordinatorMessage m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

size_t AgentOutbox::size() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace ringmaster::coordinator
