#include "trainer/train/slowdown.h"

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

absl::StatusOr<Slowdown> Slowdown::FromEnv() {
  const char* v = std::getenv("RINGMASTER_SLOWDOWN");
  if (v == nullptr || *v == '\0') return Slowdown(1.0);
  double f = 0;
  if (!absl::SimpleAtod(v, &f) || !(f >= 1.0) || f > 1000.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RINGMASTER_SLOWDOWN='", v, "': expected a factor between 1 and 1000"));
  }
  return Slowdown(f);
}

void Slowdown::End() const {
  if (factor_ <= 1.0) return;
  const auto spent = std::chrono::steady_clock::now() - start_;
  std::this_thread::sleep_for(
      std::chrono::duration_cast<std::chrono::nanoseconds>(spent * (factor_ - 1.0)));
}

}  // namespace ringmaster::trainer
