// Says at once that a stop was asked for (issue #32): the training loop sees a signal's stop flag
// only when its step finishes, which on a big model is half a minute of silence after SIGTERM.
// A thread watches the flag and prints "finishing step N, then saving a checkpoint" as soon as it
// is set; the loop still does the stopping.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ringmaster::trainer {

class StopNotice {
 public:
  using Say = std::function<void(const std::string&)>;

  // `stop` (may be null: nothing to watch) is the signal's flag; `stop_step` the step at which a
  // stop asked for now takes effect (kept current by the loop). `say` prints one line.
  StopNotice(const std::atomic<bool>* stop, const std::atomic<int64_t>* stop_step, Say say);
  StopNotice(const StopNotice&) = delete;
  StopNotice& operator=(const StopNotice&) = delete;
  ~StopNotice();

  // Prints the line now if the stop is asked for and it is not printed yet: the loop calls this
  // when it stops, so that the line comes before the checkpoint's even when the watcher has not
  // woken up yet.
  void Flush();

  // The line printed for a stop taking effect at `step`.
  static std::string Text(int64_t step);

 private:
  void Watch();

  const std::atomic<bool>* stop_;
  const std::atomic<int64_t>* stop_step_;
  Say say_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool said_ = false;
  std::thread thread_;
};

}  // namespace ringmaster::trainer
