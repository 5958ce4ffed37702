// Asynchronous collectives: a CommQueue runs operations on one worker thread, in the order they
// were submitted, and hands back a completion handle for each. The data-parallel engine uses it
// to overlap communication with compute (a unit's gradients are reduced while backward moves to
// the previous unit; the next unit's parameters are gathered while this one computes).
//
// Every rank must submit the same collectives in the same order (the communicator's contract).
// Each operation keeps the communicator's timeout; after a failure every later operation fails
// fast with the first error, so a waiter never hangs on a broken world.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "trainer/comm/work.h"

namespace ringmaster::trainer {

// Completion handle of one queued operation: Wait blocks until the operation has run.
class QueuedWork final : public Work {
 public:
  absl::Status Wait() override;
  bool IsDone() override;

 private:
  friend class CommQueue;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

class CommQueue {
 public:
  CommQueue();
  // Runs what is queued to completion, then joins the worker.
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  // Queues `op`; it runs after everything submitted before it. Buffers it touches must stay
  // valid until its Work is done.
  std::shared_ptr<Work> Submit(std::function<absl::Status()> op);

  // Submit + Wait.
  absl::Status Run(std::function<absl::Status()> op) { return Submit(std::move(op))->Wait(); }

  // Waits for everything submitted so far; returns the first failure (OK when none).
  absl::Status Drain();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<absl::Status()>, std::shared_ptr<QueuedWork>>> queue_;
  bool stop_ = false;
  absl::Status failure_;  // first failure; guarded by mu_
  std::shared_ptr<Work> last_;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace ringmaster::trainer
