// Repeated warnings, counted instead of written (issue #20): a caller that is refused thousands of
// times must not grow the log by a line each time. Per key (e.g. the kind of refusal), at most
// `burst` warnings are written per `window`; the rest are counted, and the next one written
// says how many were left out. Thread-safe.
//
// Keys may name a peer (a refusal kind and the caller's host), so their number is bounded too:
// past `max_keys`, windows that have ended with nothing left out are dropped, and when none has,
// new keys share one window (kOverflowKey), so that a caller cycling through addresses gets no
// more lines than the table's size allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringmaster {

class WarningLimiter {
 public:
  WarningLimiter(absl::Duration window, int burst, size_t max_keys = 1024)
      : window_(window), burst_(burst), max_keys_(max_keys) {}

  // The key every new key falls under once the table is full of live windows.
  static constexpr char kOverflowKey[] = "(other)";

  // The line to log for `msg` under `key` at `now`, with " (N similar warnings left out)"
  // appended when some were; empty when this one is to be left out (and is counted).
  std::string Admit(std::string_view key, std::string_view msg, absl::Time now = absl::Now());

  // Admit, and LogWarning the line when there is one.
  void Warn(std::string_view key, std::string_view msg);

 private:
  struct Window {
    absl::Time start;
    int written = 0;
    uint64_t left_out = 0;
  };
  const absl::Duration window_;
  const int burst_;
  const size_t max_keys_;
  std::mutex mu_;
  std::map<std::string, Window, std::less<>> windows_;  // at most max_keys_ + 1
};

}  // namespace ringmaster
