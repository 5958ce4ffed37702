// One job's change signal for its WatchJob streams (issue #31: watch streams wake on change, not
// by polling). The Cluster publishes the job's status after every event while anyone watches it;
// a publication that differs from the last one bumps the version and wakes the job's watchers.
// An event about another job, a node's heartbeat or a status that came out the same wakes no
// one. Watchers wait on this object's own lock, never on the cluster's, and read the status it
// holds instead of asking the cluster again.
//
// Thread-safe. Lock order: the Cluster's lock, then this one (Publish and Close run under the
// Cluster's lock; a watcher holds only this one).
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster::coordinator {

class JobWatch {
 public:
  struct Snapshot {
    uint64_t version = 0;  // grows by one at each change; the first status is version 1
    v1::JobStatus status;
    bool closed = false;  // the coordinator is shutting down: no further change comes
  };

  // Sets the status; a status that differs from the current one (byte for byte) bumps the
  // version and wakes every waiter. The first call always does.
  void Publish(const v1::JobStatus& status);
  // Wakes every waiter for good.
  void Close();

  Snapshot Current();
  // Returns once the version differs from `seen`, after `timeout`, or when closed; the snapshot
  // then. Counts the waits that ended because something changed (wakeups()).
  Snapshot WaitForChange(uint64_t seen, absl::Duration timeout);

  // Publications that changed the status (the version), and waits that a change or Close ended.
  uint64_t changes();
  uint64_t wakeups();

 private:
  absl::Mutex mu_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::string bytes_ ABSL_GUARDED_BY(mu_);  // status_, serialized: what Publish compares
  v1::JobStatus status_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster::coordinator
