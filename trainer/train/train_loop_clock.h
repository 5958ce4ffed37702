// The training loop's clock readings, shared by its files (train_loop*.cc): elapsed seconds on
// the steady clock for step and checkpoint times, and wall time for TensorBoard events.
// Internal to the loop; not part of train_loop.h.
#pragma once

#include <chrono>

namespace ringmaster::trainer {

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ringmaster::trainer
