// A node's queue of commands for its agent: the AgentChannel the job managers send through, and
// what the node's Heartbeat stream handler drains. It outlives any one stream: commands queued
// while the agent reconnects are delivered on its next stream.
//
// One stream at a time owns the outbox: Attach() returns a new epoch and makes every waiter of
// an older epoch return. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/cluster/agent_channel.h"

namespace ringmaster::coordinator {

class AgentOutbox final : public AgentChannel {
 public:
  // `command_ids` numbers commands across every outbox of the coordinator (shared, so ids are
  // unique per process).
  explicit AgentOutbox(std::shared_ptr<std::atomic<uint64_t>> command_ids);

  uint64_t Send(v1::CoordinatorMessage message) override;

  // A new stream takes over; waiters of older epochs return nullopt.
  uint64_t Attach();
  // The stream of `epoch` ended (no-op if a newer one attached): its waiter returns nullopt.
  void Detach(uint64_t epoch);
  // A stream owns the outbox now (the agent is connected).
  bool attached();

  // Blocks until a message is queued (returns it) or `epoch` is no longer the attached one.
  std::optional<v1::CoordinatorMessage> WaitPop(uint64_t epoch);
  // A message the stream failed to write goes back to the front of the queue.
  void PushFront(v1::CoordinatorMessage message);
  // Non-blocking: the next queued message, if any (tests, and draining).
  std::optional<v1::CoordinatorMessage> TryPop();
  size_t size() const;

 private:
  std::shared_ptr<std::atomic<uint64_t>> command_ids_;
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster::coordinator
