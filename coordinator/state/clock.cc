// RealClock and FakeClock.
#include "coordinator/state/clock.h"

#include "absl/time/clock.h"

namespace ringmaster::coordinator {

absl::Time RealClock::Now() const { return absl::Now(); }

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  if (d < absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace ringmaster::coordinator
