// Completion handle of one communication operation: what a Communicator's stream-ordered
// operations and CommQueue's queued ones return. Backends that run an operation on the calling
// thread (Gloo, the world of one) return one that is already done.
#pragma once

#include <memory>
#include <utility>

#include "absl/status/status.h"

namespace ringmaster::trainer {

class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the operation has completed or failed and returns its status. A backend that
  // enqueues bounds this by its collective timeout (the wait fails, naming the operation, when
  // the operation does not finish in time). Later calls return the same status at once.
  virtual absl::Status Wait() = 0;

  // Whether the operation has completed or failed (Wait would not block). Never blocks.
  virtual bool IsDone() = 0;
};

// A Work that is already done with `status`.
class CompletedWork final : public Work {
 public:
  explicit CompletedWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }
  bool IsDone() override { return true; }

 private:
  const absl::Status status_;
};

inline std::shared_ptr<Work> MakeCompletedWork(absl::Status status) {
  return std::make_shared<CompletedWork>(std::move(status));
}

}  // namespace ringmaster::trainer
