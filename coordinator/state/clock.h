// The coordinator's notion of time, injected so that rendezvous windows, join timeouts and
// heartbeat deadlines are tested with a FakeClock that tests advance by hand (no sleeps).
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringmaster::coordinator {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// Wall-clock time (absl::Now()). Thread-safe.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override;
};

// Time that moves only when told to. Thread-safe, so a test thread may advance it while the code
// under test reads it.
class FakeClock final : public Clock {
 public:
  // Starts at a fixed, recognisable instant (2023-11-14T22:13:20Z) unless given one.
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));

  absl::Time Now() const override;
  // Moves time forward by `d` (a negative `d` is ignored: time never runs backwards).
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::coordinator
