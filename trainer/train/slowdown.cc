#include "trainer/train/slowdown.h"

#include <thread>

namespace ringmaster::trainer {

void Slowdown::End() const {
  if (factor_ <= 1.0) return;
  const auto spent = std::chrono::steady_clock::now() - start_;
  std::this_thread::sleep_for(
      std::chrono::duration_cast<std::chrono::nanoseconds>(spent * (factor_ - 1.0)));
}

}  // namespace ringmaster::trainer
